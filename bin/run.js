#!/usr/bin/env -S node --max-semi-space-size=4 --expose-gc
// --max-semi-space-size: Node lets the young generation grow to 2 x 16 MB under a steady stream of
// requests (a mass cleanup, an informer): 20-30 MB of resident memory that buys no speed here.
// --expose-gc: gc run collects after each sweep, so an idle daemon does not keep a sweep's garbage resident.
// (README, Benchmarks: where the memory goes.)
import {execute} from '@oclif/core/execute'

await execute({dir: import.meta.url})
