/**
 * Values serverless.yml derives from its parameters at package time (`${file(…):name}`), where
 * CloudFormation's own functions would be clumsy: list parameters turned into ARN lists, and
 * pairs of settings that must agree computed from one parameter.
 */
'use strict';

const param = (resolveVariable, name) => resolveVariable(`param:${name}`).then((v) => String(v ?? '').trim());

/** `<modelPrefix>/models/` (slashes at either end ignored, as infra/registry/model-registry.ts does), or `models/`. */
module.exports.modelsKeyPrefix = async ({ resolveVariable }) => {
  const prefix = (await param(resolveVariable, 'modelPrefix')).replace(/^\/+|\/+$/g, '');
  return prefix ? `${prefix}/models/` : 'models/';
};

function minutes(raw) {
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > 60) throw new Error(`scalerRateMinutes: a whole number of minutes, 1 to 60 (got "${raw}")`);
  return n;
}

/** The EventBridge schedule: `rate(1 minute)`, `rate(5 minutes)`. */
module.exports.scalerRate = async ({ resolveVariable }) => {
  const n = minutes(await param(resolveVariable, 'scalerRateMinutes'));
  return `rate(${n} minute${n === 1 ? '' : 's'})`;
};

/** SCALER_TICK_MS for the scaler Lambda: the schedule's period. */
module.exports.scalerTickMs = async ({ resolveVariable }) => String(minutes(await param(resolveVariable, 'scalerRateMinutes')) * 60_000);

const buckets = async (resolveVariable) =>
  (await param(resolveVariable, 'bulkBuckets'))
    .split(',')
    .map((b) => b.trim())
    .filter(Boolean);

/** `arn:…:s3:::<bucket>` for each bulk bucket (s3:ListBucket). */
module.exports.bulkBucketArns = async ({ resolveVariable }) =>
  (await buckets(resolveVariable)).map((b) => ({ 'Fn::Sub': `arn:\${AWS::Partition}:s3:::${b}` }));

/** `arn:…:s3:::<bucket>/*` for each bulk bucket (object reads and writes). */
module.exports.bulkObjectArns = async ({ resolveVariable }) =>
  (await buckets(resolveVariable)).map((b) => ({ 'Fn::Sub': `arn:\${AWS::Partition}:s3:::${b}/*` }));

/** The drain hook outlasts the worker's own drain (DRAIN_TIMEOUT_S) by a minute, for the host to report back. */
module.exports.drainHookTimeoutS = async ({ resolveVariable }) => {
  const raw = await param(resolveVariable, 'drainTimeoutS');
  const s = Number(raw);
  if (!Number.isInteger(s) || s < 30 || s > 7140) throw new Error(`drainTimeoutS: whole seconds, 30 to 7140 (got "${raw}")`);
  return s + 60;
};
