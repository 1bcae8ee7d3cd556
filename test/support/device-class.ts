import {deviceClassApiVersion, type DeviceClass, type DeviceClassSpec} from '../../src/lib/devices/types.js'

type Json = Record<string, unknown>

/**
 * A DeviceClass as nfdctl holds it once read, every default filled in (allocation Class, capacity 1, no
 * match rule, permissions rw); `spec` sets what the test is about.
 */
export function deviceClass(name: string, spec: Partial<DeviceClassSpec> = {}): DeviceClass {
  return {apiVersion: deviceClassApiVersion, kind: 'DeviceClass', metadata: {name}, spec: {allocation: 'Class', capacity: 1, match: [], permissions: 'rw', ...spec}}
}

/**
 * A DeviceClass as a user writes it, for the validator or the API server: the smallest valid class (one
 * rule, no defaults written out). `spec` fields are added to it, `rest` replaces top-level fields; either
 * may hold what no valid class has.
 */
export function deviceClassManifest(name: string, spec: Json = {}, rest: Json = {}): Json {
  return {apiVersion: deviceClassApiVersion, kind: 'DeviceClass', metadata: {name}, spec: {match: [{subsystem: 'tty'}], ...spec}, ...rest}
}
