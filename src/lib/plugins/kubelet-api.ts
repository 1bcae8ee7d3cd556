import {fileURLToPath} from 'node:url'

import type * as grpc from '@grpc/grpc-js'

/**
 * kubelet's device-plugin API v1beta1 and PodResources API v1, loaded at run time from the .proto files
 * shipped in the package (proto/kubelet). Field names are kept as the protos spell them (keepCase), so
 * the types below read like kubelet's Go structs' wire names.
 */

export const devicePluginVersion = 'v1beta1'
export const healthy = 'Healthy'
export const unhealthy = 'Unhealthy'

export interface DevicePluginOptions {
  pre_start_required: boolean
  get_preferred_allocation_available: boolean
}

export interface PluginDevice {
  ID: string
  health: typeof healthy | typeof unhealthy
}

export interface ListAndWatchResponse {
  devices: PluginDevice[]
}

export interface PreferredAllocationRequest {
  container_requests: Array<{available_deviceIDs: string[]; must_include_deviceIDs: string[]; allocation_size: number}>
}

export interface PreferredAllocationResponse {
  container_responses: Array<{deviceIDs: string[]}>
}

export interface AllocateRequest {
  container_requests: Array<{devices_ids: string[]}>
}

export interface DeviceSpec {
  container_path: string
  host_path: string
  permissions: string
}

export interface ContainerAllocateResponse {
  envs: Record<string, string>
  mounts: Array<{container_path: string; host_path: string; read_only: boolean}>
  devices: DeviceSpec[]
  annotations: Record<string, string>
  cdi_devices: Array<{name: string}>
}

export interface AllocateResponse {
  container_responses: ContainerAllocateResponse[]
}

export interface PodResources {
  name: string
  namespace: string
  containers: Array<{name: string; devices: Array<{resource_name: string; device_ids: string[]}>}>
}

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
