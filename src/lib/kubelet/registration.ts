import {lstat} from 'node:fs/promises'
import {join} from 'node:path'

import {unary} from '../grpc-unary.js'
import {devicePluginVersion, kubeletApi, type DevicePluginOptions, type RegisterRequest} from './device-plugin-api.js'

/** kubelet's registration socket in the device-plugin directory. */
const kubeletSocketName = 'kubelet.sock'

/**
 * The identity of the running kubelet's registration socket (its inode), or undefined when there is none.
 * kubelet makes a new socket each time it starts, so a changed inode means a kubelet that does not know us.
 */
export async function kubeletSocketIdentity(pluginDir: string): Promise<number | undefined> {
  const stat = await lstat(join(pluginDir, kubeletSocketName)).catch(() => undefined)
  return stat?.isSocket() ? stat.ino : undefined
}

/**
 * Registers one plugin endpoint (a socket file name in the same directory) for a resource with kubelet.
 * A short deadline: a kubelet that has made its socket but does not serve yet holds the call, and a
 * retry (the plugin set's back-off, or the next directory event) gets through sooner than a long wait.
 */
export async function registerWithKubelet(pluginDir: string, endpoint: string, resourceName: string, options: DevicePluginOptions, timeoutMs = 500): Promise<void> {
  const api = await kubeletApi()
  const client = new api.registration(`unix:${join(pluginDir, kubeletSocketName)}`, api.grpc.credentials.createInsecure())
  try {
    await unary<RegisterRequest, object>(client, 'Register', {endpoint, options, resource_name: resourceName, version: devicePluginVersion}, timeoutMs)
  } finally {
    client.close()
  }
}
