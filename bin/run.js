#!/usr/bin/env -S node --max-semi-space-size=4
// The V8 flag: Node lets the young generation grow to 2 x 16 MB under a steady stream of requests (a
// mass cleanup, an informer): 28 MB of resident memory that buys no speed here (README, Benchmarks).
import {execute} from '@oclif/core'

await execute({dir: import.meta.url})
