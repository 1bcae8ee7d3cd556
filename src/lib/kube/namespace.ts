import {readFileSync} from 'node:fs'

/** The namespace this process runs in: $POD_NAMESPACE, the service account's namespace, else "default". */
export function ownNamespace(env: NodeJS.ProcessEnv = process.env, serviceAccountRoot = ''): string {
  if (env.POD_NAMESPACE) return env.POD_NAMESPACE
  try {
    return readFileSync(`${serviceAccountRoot}/var/run/secrets/kubernetes.io/serviceaccount/namespace`, 'utf8').trim() || 'default'
  } catch {
    return 'default'
  }
}
