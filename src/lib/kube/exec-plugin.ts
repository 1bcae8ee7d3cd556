import {spawn} from 'node:child_process'
import type {Readable, Writable} from 'node:stream'

import {ConfigError, errorMessage} from '../errors.js'
import type {ClusterEntry, ExecConfig} from './kubeconfig-reader.js'

/** Where an exec plugin's stdin comes from and its stderr goes (kubectl passes both through). */
export interface ExecIo {
  /** 'inherit' hands the plugin our own fd 0 (a terminal stays a terminal); a stream is piped in (tests). */
  readonly stdin: 'inherit' | Readable
  readonly stdinIsTerminal: boolean
  readonly stderr: Writable
}

export function processIo(): ExecIo {
  return {stderr: process.stderr, stdin: 'inherit', stdinIsTerminal: Boolean(process.stdin.isTTY)}
}

export interface ExecStatus {
  token?: string
  expirationTimestamp?: string
  clientCertificateData?: string
  clientKeyData?: string
}

/** client-go's text when a plugin is missing (exec.go installHintVerboseHelp), before the kubeconfig's installHint. */
const installHintHelp =
  'It looks like you are trying to use a client-go credential plugin that is not installed. To learn more about this feature, consult the documentation available at: https://kubernetes.io/docs/reference/access-authn-authz/authentication/#client-go-credential-plugins'

/** A non-interactive plugin that has not answered after this long is stopped (kubectl waits forever). */
const nonInteractiveTimeoutMs = 60_000

/**
 * Whether the plugin runs interactively (client-go's interactiveMode rules): Never → no; IfAvailable → when
 * stdin is a terminal; Always → yes, and a ConfigError without a terminal. v1beta1 defaults to IfAvailable.
 */
export function isInteractive(exec: ExecConfig, stdinIsTerminal: boolean, where: string): boolean {
  const mode = exec.interactiveMode ?? 'IfAvailable'
  if (mode === 'Never') return false
  if (mode === 'Always' && !stdinIsTerminal) {
    throw new ConfigError(`${where}: credential plugin "${exec.command}" has interactiveMode Always, but standard input is not a terminal; run it from a terminal or change interactiveMode`)
  }
  return stdinIsTerminal
}

/** KUBERNETES_EXEC_INFO as client-go encodes it; spec.cluster only with provideClusterInfo. */
export function execInfo(exec: ExecConfig, cluster: ClusterEntry, caData: Buffer | undefined, interactive: boolean): string {
  const spec: Record<string, unknown> = {interactive}
  if (exec.provideClusterInfo) {
    spec.cluster = {
      'certificate-authority-data': caData?.toString('base64'),
      config: cluster.execExtension,
      'insecure-skip-tls-verify': cluster.insecureSkipTlsVerify || undefined,
      'proxy-url': cluster.proxyUrl?.href,
      server: cluster.server,
      'tls-server-name': cluster.tlsServerName,
    }
  }
  return JSON.stringify({apiVersion: exec.apiVersion, kind: 'ExecCredential', spec})
}

/** Runs the plugin once and returns its ExecCredential status; every failure is a one-line ConfigError. */
export async function runExecPlugin(exec: ExecConfig, info: {cluster: ClusterEntry; caData?: Buffer; where: string}, io: ExecIo): Promise<ExecStatus> {
  const where = `${info.where}: credential plugin "${exec.command}"`
  const interactive = isInteractive(exec, io.stdinIsTerminal, info.where)
  const env = {
    ...process.env,
    ...Object.fromEntries((exec.env ?? []).map((e) => [e.name, e.value])),
    KUBERNETES_EXEC_INFO: execInfo(exec, info.cluster, info.caData, interactive),
  }
  const stdin = !interactive ? 'ignore' : io.stdin === 'inherit' ? 'inherit' : 'pipe'
  const child = spawn(exec.command, [...(exec.args ?? [])], {env, stdio: [stdin, 'pipe', 'pipe']})
  // Our own timer, not spawn's `timeout`: Node leaves that one armed when the command cannot be started
  // (ENOENT), and a missing plugin then kept the CLI from exiting for the whole minute.
  const timer = interactive ? undefined : setTimeout(() => child.kill('SIGTERM'), nonInteractiveTimeoutMs)
  if (stdin === 'pipe') (io.stdin as Readable).pipe(child.stdin!)
  const stdout: Buffer[] = []
  child.stdout!.on('data', (chunk: Buffer) => stdout.push(chunk))
  child.stderr!.on('data', (chunk: Buffer) => io.stderr.write(chunk)) // the plugin speaks to the user, as under kubectl
  const exit = await new Promise<{code: number | null; signal: NodeJS.Signals | null}>((resolve, reject) => {
    child.once('error', reject)
    child.once('close', (code, signal) => resolve({code, signal}))
  })
    .finally(() => clearTimeout(timer))
    .catch((error: unknown) => {
      if ((error as {code?: string}).code === 'ENOENT') {
        const hint = exec.installHint
          ? ` ${exec.installHint
              .split('\n')
              .map((l) => l.trim())
              .filter(Boolean)
              .join(' ')}`
          : ''
        throw new ConfigError(`${where} not found. ${installHintHelp}${hint}`, {cause: error})
      }
      throw new ConfigError(`${where} could not be started: ${errorMessage(error)}`, {cause: error})
    })
  if (exit.code !== 0) {
    const how = exit.signal ? `was stopped by ${exit.signal}${exit.signal === 'SIGTERM' && !interactive ? ` after ${nonInteractiveTimeoutMs / 1000}s` : ''}` : `failed with exit code ${exit.code}`
    throw new ConfigError(`${where} ${how} (its stderr is shown above)`)
  }
  return parseCredential(Buffer.concat(stdout).toString('utf8'), exec, where)
}

function parseCredential(text: string, exec: ExecConfig, where: string): ExecStatus {
  let credential: {apiVersion?: unknown; kind?: unknown; status?: ExecStatus | null}
  try {
    credential = JSON.parse(text) as typeof credential
  } catch (error) {
    throw new ConfigError(`${where} printed no ExecCredential JSON: ${errorMessage(error)}`, {cause: error})
  }
  if (credential.kind !== 'ExecCredential' || credential.apiVersion !== exec.apiVersion) {
    throw new ConfigError(`${where} answered apiVersion "${String(credential.apiVersion)}" kind "${String(credential.kind)}"; expected ExecCredential of ${exec.apiVersion}`)
  }
  const status = credential.status
  if (!status) throw new ConfigError(`${where} returned no status`)
  if (Boolean(status.clientCertificateData) !== Boolean(status.clientKeyData)) {
    throw new ConfigError(`${where} returned a client certificate without its key, or a key without its certificate`)
  }
  if (!status.token && !status.clientCertificateData) throw new ConfigError(`${where} returned neither a token nor a client certificate and key`)
  return status
}
