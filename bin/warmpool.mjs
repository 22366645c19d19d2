#!/usr/bin/env node
// The `warmpool` CLI. Sources are TypeScript run through tsx's loader, so there is no build
// step between a checkout and a running stack; the same loader is registered in every worker
// thread (see worker/engine/thread-bootstrap.mjs) and inherited by forked worker processes.
import { register } from 'tsx/esm/api';

// The AWS SDK warns at every start that releases after January 2027 need Node 22; warmpool
// supports Node 20+, and the README says so. Set the variable to 'false' to see it again.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

register();
const { main } = await import('../scripts/cli.ts');
process.exitCode = await main(process.argv.slice(2));
