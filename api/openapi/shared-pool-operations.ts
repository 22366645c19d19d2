/**
 * The shared pool routes (DESIGN §2, §8) in the operation table (operations.ts): list, read, set,
 * delete. The examples build on each other in table order (set, list, read, delete), against
 * `warmpool dev` or the conformance test's API.
 */
import { authed, jsonBody, malformedBody, type OperationSpec, type ResponseSpec, tooLarge } from './operation-spec.ts';
import * as S from './schemas.ts';

const EXAMPLE_POOL = 'long-tail';
const name = { name: S.PoolName };
const poolNotFound: ResponseSpec = { description: 'No such pool', schema: S.ErrorBody, codes: ['pool_not_found'] };
const badName: ResponseSpec = { description: 'Not a pool name', schema: S.ErrorBody, codes: ['invalid_pool'] };
const adminOnly: ResponseSpec = { description: 'The tenant is not in ADMIN_TENANTS', schema: S.ErrorBody, codes: ['forbidden'] };

export const SHARED_POOL_OPERATIONS: readonly OperationSpec[] = [
  {
    operationId: 'putPool',
    method: 'put',
    path: '/v1/pools/:name',
    tag: 'Models and deployments',
    summary: 'Create or change a shared pool (merge)',
    description:
      'Workers of a shared pool are not bound to a model: each holds several within `memoryMb`, and a deployment joins ' +
      'with `pool` (PUT /v1/deployments/{model}). Fields left out keep their values; a new pool needs `max` and gets ' +
      'min 1 (at most max), standby 0 and memoryMb 1024.',
    auth: true,
    params: name,
    body: { schema: S.SharedPoolChange, required: true },
    responses: {
      200: { description: 'The new revision, with the deployments that joined', schema: S.SharedPool },
      400: { description: 'Invalid change', schema: S.ErrorBody, codes: [...malformedBody, 'invalid_body', 'invalid_pool'] },
      403: adminOnly,
      409: { description: '`ifRevision` is not the current revision', schema: S.ErrorBody, codes: ['revision_conflict'] },
      413: tooLarge(),
      ...jsonBody,
      ...authed,
    },
    example: { params: { name: EXAMPLE_POOL }, body: { max: 3, standby: 1, memoryMb: 2048 }, status: 200 },
  },
  {
    operationId: 'listPools',
    method: 'get',
    path: '/v1/pools',
    tag: 'Models and deployments',
    summary: 'Every shared pool, with the deployments that joined each',
    auth: true,
    responses: { 200: { description: 'The pools, by name', schema: S.SharedPoolList }, ...authed },
    example: { status: 200 },
  },
  {
    operationId: 'getPool',
    method: 'get',
    path: '/v1/pools/:name',
    tag: 'Models and deployments',
    summary: 'A shared pool, with the deployments that joined it',
    auth: true,
    params: name,
    responses: { 200: { description: 'The pool', schema: S.SharedPool }, 400: badName, 404: poolNotFound, ...authed },
    example: { params: { name: EXAMPLE_POOL }, status: 200 },
  },
  {
    operationId: 'deletePool',
    method: 'delete',
    path: '/v1/pools/:name',
    tag: 'Models and deployments',
    summary: 'Delete a shared pool that no deployment names',
    description: 'While deployments name the pool: 409 `pool_in_use`, naming them (move each out with `pool: null` or another pool first).',
    auth: true,
    params: name,
    responses: {
      200: { description: 'Deleted', schema: S.SharedPoolDeleted },
      400: badName,
      403: adminOnly,
      404: poolNotFound,
      409: { description: 'Deployments still name the pool', schema: S.ErrorBody, codes: ['pool_in_use'] },
      ...authed,
    },
    example: { params: { name: EXAMPLE_POOL }, status: 200 },
  },
];
