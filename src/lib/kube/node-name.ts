import {hostname} from 'node:os'

/** Where this node's name comes from when none is given: $NODE_NAME (the DaemonSet's downward API), then the hostname. */
export interface NodeNameSources {
  readonly env: {readonly NODE_NAME?: string}
  readonly hostname: string
}

/** The name of the Node this process runs on: the one given (--node-name), else $NODE_NAME, else the hostname. */
export function ownNodeName(given: string | undefined, sources: NodeNameSources = {env: process.env, hostname: hostname()}): string {
  // An empty NODE_NAME (the systemd env file's placeholder) means "not set".
  return given ?? (sources.env.NODE_NAME || sources.hostname)
}
