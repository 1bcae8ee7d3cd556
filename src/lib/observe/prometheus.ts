import {createRequire} from 'node:module'

import type * as PromClient from 'prom-client'

// prom-client's index also loads its default metrics (and with them @opentelemetry/api, 63 files), the
// Pushgateway and the cluster aggregator, none of which nfdctl uses: 50 ms of start-up and 3 MB of resident
// memory in every long-running command. Its own modules are loaded instead; the types stay prom-client's.
// (prom-client is pinned to an exact version, so these paths cannot move under us.)
const require = createRequire(import.meta.url)

export const Registry: typeof PromClient.Registry = require('prom-client/lib/registry')
export const Counter: typeof PromClient.Counter = require('prom-client/lib/counter')
export const Gauge: typeof PromClient.Gauge = require('prom-client/lib/gauge')
export const Histogram: typeof PromClient.Histogram = require('prom-client/lib/histogram')
export type Registry = PromClient.Registry
export type Counter<T extends string = string> = PromClient.Counter<T>
export type Gauge<T extends string = string> = PromClient.Gauge<T>
export type Histogram<T extends string = string> = PromClient.Histogram<T>
