/** The simulator (DESIGN §8): arrival traces replayed through the live scaler's policy; the public surface for the CLI and the dashboard. */
export { minuteArrivals, realiseCounts, type ArrivalPattern } from './arrivals.ts';
export { calibrate, figures, type Calibration, type MeasuredJob } from './calibration.ts';
export { PHASES, coldStartModel, parsePhases, type Phase } from './cold-start.ts';
export { compare, defaultSettings, type PolicyReport, type SimulationSettings } from './compare.ts';
export { readPolicyFile } from './policy-file.ts';
export { reportTable, writeReport, type TraceInfo } from './report.ts';
export { batchPointsFrom, type BatchPoint } from './service.ts';
export { cheapestLine, sweepTable, writeSweep } from './sweep-report.ts';
export { parseSweep, runSweep } from './sweep.ts';
export { parseTime, readTraceFile, type Trace } from './trace.ts';
export { MINUTE_MS } from './world.ts';
