import {mkdtemp, rm} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'

import type {KubeClient} from '../../src/lib/kube/kube-client.js'
import {ControlPlane, type ControlPlaneOptions} from '../../harness/controlplane/control-plane.js'
import {ensureBinaries, kubeVersion} from '../../harness/controlplane/paths.js'
import {missingPrerequisite} from './prerequisites.js'
import {stopAtRunEnd} from './run-end.js'

const log = (line: string): void => {
  process.stderr.write(`      ${line}\n`)
}

let binaries: Promise<string> | undefined
const planes: Array<{plane: ControlPlane; dir: string}> = []
let shared: Promise<ControlPlane> | undefined

async function binDir(context: Mocha.Context): Promise<string> {
  binaries ??= ensureBinaries(log)
  try {
    return await binaries
  } catch (error) {
    return missingPrerequisite(context, `kube-apiserver and etcd could not be built: ${(error as Error).message.split('\n').slice(-3).join(' ')}`)
  }
}

/** Starts a private control plane (its own etcd) with extra kube-apiserver flags; stopped after the run. */
export async function startControlPlane(context: Mocha.Context, apiserverFlags: readonly string[] = [], cluster?: ControlPlaneOptions['cluster']): Promise<ControlPlane> {
  const bin = await binDir(context)
  const dir = await mkdtemp(join(tmpdir(), 'nfdctl-cp-'))
  const plane = await ControlPlane.start({apiserverFlags, binDir: bin, cluster, dir, log})
  planes.push({dir, plane})
  // The suites choose their expectations by KUBE_VERSION (test/support/kube-version.ts): the server must run it.
  const client = await plane.client()
  const {gitVersion} = await client.request<{gitVersion: string}>('GET', '/version').finally(() => client.close())
  if (gitVersion !== kubeVersion) throw new Error(`kube-apiserver runs ${gitVersion}, not KUBE_VERSION ${kubeVersion}`)
  return plane
}

/** The control plane shared by the integration suites: started once, on first use. */
export async function sharedControlPlane(context: Mocha.Context): Promise<ControlPlane> {
  context.timeout(40 * 60_000) // a cold build of kube-apiserver on 2 cores
  await binDir(context)
  shared ??= startControlPlane(context)
  return shared
}

/** An admin client on the shared control plane; close it in after(). */
export async function adminClient(context: Mocha.Context): Promise<{plane: ControlPlane; client: KubeClient}> {
  const plane = await sharedControlPlane(context)
  return {client: await plane.client(), plane}
}

export async function stopAllControlPlanes(): Promise<void> {
  for (const {dir, plane} of planes.splice(0)) {
    await plane.stop()
    await rm(dir, {force: true, recursive: true})
  }
}

stopAtRunEnd(stopAllControlPlanes)
