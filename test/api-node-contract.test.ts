/**
 * The HTTP contract (support/http-contract.ts) against the API on Node: `warmpool api` served
 * in-process by the test stack, as every other integration suite runs it.
 */
import { describeHttpContract, startContractStack } from './support/http-contract.ts';
import { KEY_A } from './support/stack.ts';

describeHttpContract('the HTTP contract on Node', async () => {
  const stack = await startContractStack();
  return { url: stack.api.url, apiKey: KEY_A, close: () => stack.close() };
});
