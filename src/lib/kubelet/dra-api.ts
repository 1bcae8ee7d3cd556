import {fileURLToPath} from 'node:url'

import type * as grpc from '@grpc/grpc-js'

import type {MessageFields} from '../proto-fields.js'

/**
 * kubelet's DRA plugin API (v1 and v1beta1), plugin registration and DRA device health (v1 and v1alpha1),
 * loaded at run time from the .proto files shipped in the package (proto/kubelet), field names as the
 * protos spell them (keepCase). Each type's `*Fields` value is held against every version's .proto by a
 * unit test (see proto-fields.ts).
 */

export interface ClaimRef {
  namespace: string
  uid: string
  name: string
}
export const claimRefFields = {name: 'string', namespace: 'string', uid: 'string'} satisfies MessageFields<ClaimRef>

/** NodePrepareResourcesRequest and NodeUnprepareResourcesRequest alike. */
export interface ClaimsRequest {
  claims: ClaimRef[]
}
export const claimsRequestFields = {claims: ['repeated', claimRefFields]} satisfies MessageFields<ClaimsRequest>

export interface PreparedDeviceMessage {
  request_names: string[]
  pool_name: string
  device_name: string
  cdi_device_ids: string[]
}
export const preparedDeviceMessageFields = {
  cdi_device_ids: ['repeated', 'string'],
  device_name: 'string',
  pool_name: 'string',
  request_names: ['repeated', 'string'],
} satisfies MessageFields<PreparedDeviceMessage>

export interface NodePrepareResourcesResponse {
  claims: Record<string, {devices: PreparedDeviceMessage[]; error: string}>
}
export const nodePrepareResourcesResponseFields = {claims: ['map', {devices: ['repeated', preparedDeviceMessageFields], error: 'string'}]} satisfies MessageFields<NodePrepareResourcesResponse>

export interface NodeUnprepareResourcesResponse {
  claims: Record<string, {error: string}>
}
export const nodeUnprepareResourcesResponseFields = {claims: ['map', {error: 'string'}]} satisfies MessageFields<NodeUnprepareResourcesResponse>

export interface PluginInfo {
  type: string
  name: string
  endpoint: string
  supported_versions: string[]
}
export const pluginInfoFields = {endpoint: 'string', name: 'string', supported_versions: ['repeated', 'string'], type: 'string'} satisfies MessageFields<PluginInfo>

export interface RegistrationStatus {
  plugin_registered: boolean
  error: string
}
export const registrationStatusFields = {error: 'string', plugin_registered: 'boolean'} satisfies MessageFields<RegistrationStatus>

/** The HealthStatus enum's names, by number (enums are loaded as their names); a unit test holds them to the .proto. */
export const healthStatuses = ['UNKNOWN', 'HEALTHY', 'UNHEALTHY'] as const
export type HealthStatus = (typeof healthStatuses)[number]

export interface NodeWatchResourcesResponse {
  devices: Array<{
    device: {pool_name: string; device_name: string}
    health: HealthStatus
    last_updated_time: number
    health_check_timeout_seconds: number
    message: string
  }>
}
export const nodeWatchResourcesResponseFields = {
  devices: ['repeated', {device: {device_name: 'string', pool_name: 'string'}, health: 'string', health_check_timeout_seconds: 'number', last_updated_time: 'number', message: 'string'}],
} satisfies MessageFields<NodeWatchResourcesResponse>

/** The versions kubelet may pick from, newest first per service. */
export const supportedVersions = ['v1.DRAPlugin', 'v1beta1.DRAPlugin', 'v1.DRAResourceHealth', 'v1alpha1.DRAResourceHealth']

const protoDir = fileURLToPath(new URL('../../../proto/kubelet/', import.meta.url))

interface Loaded {
  readonly grpc: typeof grpc
  readonly registration: grpc.ServiceDefinition
  /** The DRAPlugin service of each version kubelet may call. */
  readonly draPlugin: readonly grpc.ServiceDefinition[]
  /** The DRAResourceHealth service of each version kubelet may call. */
  readonly health: readonly grpc.ServiceDefinition[]
}

let loaded: Promise<Loaded> | undefined

/** gRPC and the protos, imported and parsed on first use only. */
export async function kubeletDraApi(): Promise<Loaded> {
  loaded ??= (async () => {
    const [grpcModule, {loadSync}] = await Promise.all([import('@grpc/grpc-js'), import('@grpc/proto-loader')])
    const options = {defaults: true, enums: String, keepCase: true, longs: Number}
    // Each file alone: the health API's package `v1` is also the PodResources API's.
    const service = (file: string, path: string): grpc.ServiceDefinition => {
      const root = grpcModule.loadPackageDefinition(loadSync(`${protoDir}${file}`, options))
      const found = path.split('.').reduce<unknown>((node, part) => (node as Record<string, unknown>)[part], root) as grpc.ServiceClientConstructor
      return found.service
    }
    return {
      draPlugin: [service('dra-v1.proto', 'k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin'), service('dra-v1beta1.proto', 'k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin')],
      grpc: grpcModule,
      health: [service('dra-health-v1.proto', 'v1.DRAResourceHealth'), service('dra-health-v1alpha1.proto', 'v1alpha1.DRAResourceHealth')],
      registration: service('pluginregistration-v1.proto', 'pluginregistration.Registration'),
    }
  })()
  return loaded
}
