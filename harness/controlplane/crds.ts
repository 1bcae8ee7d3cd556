import {readdir, readFile} from 'node:fs/promises'
import {join} from 'node:path'
import {parseAllDocuments} from 'yaml'

import {isStatus} from '../../src/lib/kube/api-error.js'
import type {KubeClient} from '../../src/lib/kube/kube-client.js'
import {waitFor} from '../process/wait.js'

const crdPath = '/apis/apiextensions.k8s.io/v1/customresourcedefinitions'

interface Crd {
  metadata: {name: string}
  spec: {group: string; names: {plural: string}; scope: string; versions: Array<{name: string; served: boolean}>}
  status?: {conditions?: Array<{type: string; status: string}>}
}

export async function readCrds(dir: string): Promise<Crd[]> {
  const files = (await readdir(dir)).filter((f) => f.endsWith('.yaml')).sort()
  const crds: Crd[] = []
  for (const file of files) {
    for (const doc of parseAllDocuments(await readFile(join(dir, file), 'utf8'))) {
      const value = doc.toJS() as Crd | null
      if (value) crds.push(value)
    }
  }
  return crds
}

/** Creates the CRDs (keeping ones that exist) and waits until each is Established and its resources answer. */
export async function applyCrds(client: KubeClient, crds: readonly Crd[]): Promise<void> {
  for (const crd of crds) {
    try {
      await client.request('POST', crdPath, {body: crd})
    } catch (error) {
      if (!isStatus(error, 'Conflict')) throw error
    }
  }
  for (const crd of crds) await waitForCrd(client, crd)
}

export async function waitForCrd(client: KubeClient, crd: Crd): Promise<void> {
  await waitFor(`CRD ${crd.metadata.name} to be Established`, async () => {
    const live = await client.request<Crd>('GET', `${crdPath}/${crd.metadata.name}`)
    return live.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True')
  })
  for (const version of crd.spec.versions.filter((v) => v.served)) {
    await waitFor(`${crd.spec.names.plural}.${crd.spec.group}/${version.name} to be served`, async () => {
      await client.request('GET', `/apis/${crd.spec.group}/${version.name}/${crd.spec.names.plural}`, {query: {limit: 1}})
      return true
    })
  }
}

/** Deletes a CRD and waits until its resources are no longer served. */
export async function deleteCrd(client: KubeClient, crd: Crd): Promise<void> {
  try {
    await client.request('DELETE', `${crdPath}/${crd.metadata.name}`)
  } catch (error) {
    if (!isStatus(error, 'NotFound')) throw error
  }
  const version = crd.spec.versions.find((v) => v.served)!.name
  await waitFor(
    `CRD ${crd.metadata.name} to be gone`,
    async () => {
      try {
        await client.request('GET', `${crdPath}/${crd.metadata.name}`)
        return false
      } catch (error) {
        if (!isStatus(error, 'NotFound')) throw error
      }
      try {
        await client.request('GET', `/apis/${crd.spec.group}/${version}/${crd.spec.names.plural}`, {query: {limit: 1}})
        return false
      } catch (error) {
        return isStatus(error, 'NotFound')
      }
    },
    {timeoutMs: 60_000},
  )
}
