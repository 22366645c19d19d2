/**
 * What a tenant is told when ONNX Runtime rejects a forward pass for one job alone (the batcher
 * bisected it out: the rest of its batch ran). ORT's own message names graph nodes
 * (`Name:'/Gather_1'`) and the model's internal sizes: the operator's, not the tenant's, so it
 * goes to the worker's log and never into the job's error.
 *
 * The data's fault, not the model version's: a value in the inputs outside what an op accepts,
 * i.e. an index out of range. Validation cannot see those (any INT64 is a valid INT64), the model
 * ran its warm-up and the rest of the batch, and a tenant can send them on purpose. So they are
 * `invalid_input` (400 on sync inference, never retried, not a canary failure). ORT says so in
 * these words only, from the index-taking kernels:
 *   Gather, ScatterElements      "indices element out of data bounds, idx=… must be within …"
 *   GatherElements               "GatherElements op: Out of range value in index tensor"
 *   GatherND, ScatterND          "invalid indice found, indice = …"
 * Any other rejection is the model's (`inference_failed`, a canary failure): an op that fails on
 * data the model declares it accepts is a fault of that version.
 */

const INDEX_OUT_OF_RANGE = [/indices element out of data bounds/i, /out of range value in index tensor/i, /invalid indice found/i];

export const INPUT_REJECTED = "the model rejected this input: an index or value is out of the model's range";
export const MODEL_FAILED = "the model failed on this input; the worker has logged ONNX Runtime's message";

/** The job's failure for ORT's message (`code: message`, as worker/intake.ts fails jobs); the message is never ORT's. */
export function rejectionOf(ortMessage: string): { code: 'invalid_input' | 'inference_failed'; message: string } {
  return INDEX_OUT_OF_RANGE.some((re) => re.test(ortMessage))
    ? { code: 'invalid_input', message: INPUT_REJECTED }
    : { code: 'inference_failed', message: MODEL_FAILED };
}
