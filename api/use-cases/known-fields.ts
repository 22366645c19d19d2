/**
 * Strict request bodies: a top-level field the API does not know is refused (400
 * `unknown_field`) naming it and the known field it most likely meant (infra/kernel/closest-name.ts). A misspelt option
 * ignored in silence is worse than a refusal: `"webhook_url"` for `"webhook"` is a job whose
 * webhook never comes, and nothing says why.
 *
 * Only the top level is checked. What is inside `parameters` and inside each tensor is the Open
 * Inference Protocol's to extend (Triton's binary extension puts `binary_data_size` there, and
 * clients send parameters of their own), so it stays open.
 */
import { closestName } from '../../infra/kernel/closest-name.ts';
import { InvalidInputError } from '../../infra/kernel/errors.ts';

/**
 * The Open Inference Protocol's own top-level fields of an inference request, and the two its
 * binary extension's example request also carries (`model_name`, `model_version`: the model is
 * the URL's; they are taken and not read).
 */
export const OIP_REQUEST_FIELDS = ['id', 'inputs', 'outputs', 'parameters', 'model_name', 'model_version'] as const;

/** A job submission or sync inference body: the OIP's fields, then warmpool's options. */
export const JOB_REQUEST_FIELDS = [...OIP_REQUEST_FIELDS, 'priority', 'version', 'timeoutMs', 'webhook', 'degradable', 'cache'] as const;

/**
 * Throws 400 `unknown_field` for the first key of `body` not in `known`: `what` names the
 * request in the message ("a job request").
 */
export function rejectUnknownFields(body: Record<string, unknown>, known: readonly string[], what: string): void {
  for (const field of Object.keys(body)) {
    if (known.includes(field)) continue;
    const near = closestName(field, known);
    const hint = near === undefined ? `; its fields are ${known.map((k) => `"${k}"`).join(', ')}` : `; did you mean "${near}"?`;
    throw new InvalidInputError('unknown_field', `"${field}" is not a field of ${what}${hint}`);
  }
}
