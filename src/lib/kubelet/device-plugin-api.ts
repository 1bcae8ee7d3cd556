import {fileURLToPath} from 'node:url'

import type * as grpc from '@grpc/grpc-js'

import type {MessageFields} from '../proto-fields.js'

/**
 * kubelet's device-plugin API v1beta1 and PodResources API v1, loaded at run time from the .proto files
 * shipped in the package (proto/kubelet). Field names are kept as the protos spell them (keepCase), so
 * the types below read like kubelet's Go structs' wire names. Each type's `*Fields` value is held against
 * the .proto by a unit test (see proto-fields.ts).
 */

export const devicePluginVersion = 'v1beta1'
export const healthy = 'Healthy'
export const unhealthy = 'Unhealthy'

export interface DevicePluginOptions {
  pre_start_required: boolean
  get_preferred_allocation_available: boolean
}
export const devicePluginOptionsFields = {get_preferred_allocation_available: 'boolean', pre_start_required: 'boolean'} satisfies MessageFields<DevicePluginOptions>

export interface RegisterRequest {
  version: string
  endpoint: string
  resource_name: string
  options: DevicePluginOptions
}
export const registerRequestFields = {endpoint: 'string', options: devicePluginOptionsFields, resource_name: 'string', version: 'string'} satisfies MessageFields<RegisterRequest>

export interface PluginDevice {
  ID: string
  health: typeof healthy | typeof unhealthy
}
export const pluginDeviceFields = {health: 'string', ID: 'string'} satisfies MessageFields<PluginDevice>

export interface ListAndWatchResponse {
  devices: PluginDevice[]
}
export const listAndWatchResponseFields = {devices: ['repeated', pluginDeviceFields]} satisfies MessageFields<ListAndWatchResponse>

export interface PreferredAllocationRequest {
  container_requests: Array<{available_deviceIDs: string[]; must_include_deviceIDs: string[]; allocation_size: number}>
}
export const preferredAllocationRequestFields = {
  container_requests: ['repeated', {allocation_size: 'number', available_deviceIDs: ['repeated', 'string'], must_include_deviceIDs: ['repeated', 'string']}],
} satisfies MessageFields<PreferredAllocationRequest>

export interface PreferredAllocationResponse {
  container_responses: Array<{deviceIDs: string[]}>
}
export const preferredAllocationResponseFields = {container_responses: ['repeated', {deviceIDs: ['repeated', 'string']}]} satisfies MessageFields<PreferredAllocationResponse>

export interface AllocateRequest {
  container_requests: Array<{devices_ids: string[]}>
}
export const allocateRequestFields = {container_requests: ['repeated', {devices_ids: ['repeated', 'string']}]} satisfies MessageFields<AllocateRequest>

export interface DeviceSpec {
  container_path: string
  host_path: string
  permissions: string
}
export const deviceSpecFields = {container_path: 'string', host_path: 'string', permissions: 'string'} satisfies MessageFields<DeviceSpec>

export interface ContainerAllocateResponse {
  envs: Record<string, string>
  mounts: Array<{container_path: string; host_path: string; read_only: boolean}>
  devices: DeviceSpec[]
  annotations: Record<string, string>
  cdi_devices: Array<{name: string}>
}
export const containerAllocateResponseFields = {
  annotations: ['map', 'string'],
  cdi_devices: ['repeated', {name: 'string'}],
  devices: ['repeated', deviceSpecFields],
  envs: ['map', 'string'],
  mounts: ['repeated', {container_path: 'string', host_path: 'string', read_only: 'boolean'}],
} satisfies MessageFields<ContainerAllocateResponse>

export interface AllocateResponse {
  container_responses: ContainerAllocateResponse[]
}
export const allocateResponseFields = {container_responses: ['repeated', containerAllocateResponseFields]} satisfies MessageFields<AllocateResponse>

export interface PodResources {
  name: string
  namespace: string
  containers: Array<{name: string; devices: Array<{resource_name: string; device_ids: string[]}>}>
}
export const podResourcesFields = {
  containers: ['repeated', {devices: ['repeated', {device_ids: ['repeated', 'string'], resource_name: 'string'}], name: 'string'}],
  name: 'string',
  namespace: 'string',
} satisfies MessageFields<PodResources>

export interface ListPodResourcesResponse {
  pod_resources: PodResources[]
}
export const listPodResourcesResponseFields = {pod_resources: ['repeated', podResourcesFields]} satisfies MessageFields<ListPodResourcesResponse>

const protoDir = fileURLToPath(new URL('../../../proto/kubelet/', import.meta.url))

interface Loaded {
  readonly grpc: typeof grpc
  readonly registration: grpc.ServiceClientConstructor
  readonly devicePlugin: grpc.ServiceDefinition
  readonly devicePluginClient: grpc.ServiceClientConstructor
  readonly podResourcesLister: grpc.ServiceClientConstructor
}

let loaded: Promise<Loaded> | undefined

/** gRPC and the protos, imported and parsed on first use only: commands without plugins never pay for them. */
export async function kubeletApi(): Promise<Loaded> {
  loaded ??= (async () => {
    const [grpcModule, {loadSync}] = await Promise.all([import('@grpc/grpc-js'), import('@grpc/proto-loader')])
    const options = {defaults: true, enums: String, keepCase: true, longs: Number}
    const plugin = grpcModule.loadPackageDefinition(loadSync(`${protoDir}deviceplugin-v1beta1.proto`, options)).v1beta1 as grpc.GrpcObject
    const podResources = grpcModule.loadPackageDefinition(loadSync(`${protoDir}podresources-v1.proto`, options)).v1 as grpc.GrpcObject
    const devicePluginClient = plugin.DevicePlugin as grpc.ServiceClientConstructor
    return {
      devicePlugin: devicePluginClient.service,
      devicePluginClient,
      grpc: grpcModule,
      podResourcesLister: podResources.PodResourcesLister as grpc.ServiceClientConstructor,
      registration: plugin.Registration as grpc.ServiceClientConstructor,
    }
  })()
  return loaded
}
