import {readFileSync} from 'node:fs'

/**
 * The namespace this process works in: $POD_NAMESPACE, the service account's namespace file (in a pod),
 * the kubeconfig context's namespace (outside a pod), else "default".
 */
export function ownNamespace(env: NodeJS.ProcessEnv = process.env, serviceAccountRoot = '', contextNamespace?: string): string {
  if (env.POD_NAMESPACE) return env.POD_NAMESPACE
  try {
    const fromFile = readFileSync(`${serviceAccountRoot}/var/run/secrets/kubernetes.io/serviceaccount/namespace`, 'utf8').trim()
    if (fromFile) return fromFile
  } catch (error) {
    const code = (error as {code?: string}).code
    if (code !== 'ENOENT' && code !== 'ENOTDIR') throw error
  }
  return contextNamespace || 'default'
}
