import {readFile, writeFile} from 'node:fs/promises'

/** The parts of a kubeconfig that tests change (the test control plane writes its kubeconfigs as JSON). */
export interface Kubeconfig {
  clusters: Array<{cluster: Record<string, unknown>}>
  contexts: Array<{context: Record<string, unknown>}>
  users: Array<{user: Record<string, unknown>}>
}

/**
 * A copy of the kubeconfig at `path` with `change` applied, written beside it as `<path>-<name>` with the
 * owner-only mode a kubeconfig holding credentials has; returns the copy's path.
 */
export async function kubeconfigWith(path: string, name: string, change: (doc: Kubeconfig) => void): Promise<string> {
  const doc = JSON.parse(await readFile(path, 'utf8')) as Kubeconfig
  change(doc)
  const copy = `${path}-${name}`
  await writeFile(copy, JSON.stringify(doc), {mode: 0o600})
  return copy
}
