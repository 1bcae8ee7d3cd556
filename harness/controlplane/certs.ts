import {execFile} from 'node:child_process'
import {writeFile} from 'node:fs/promises'
import {join} from 'node:path'
import {promisify} from 'node:util'

const run = promisify(execFile)

async function openssl(dir: string, ...args: string[]): Promise<void> {
  await run('openssl', args, {cwd: dir})
}

async function newKey(dir: string, name: string): Promise<void> {
  await openssl(dir, 'ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', `${name}.key`)
}

async function signed(dir: string, name: string, subject: string, extensions: string): Promise<void> {
  await newKey(dir, name)
  await openssl(dir, 'req', '-new', '-key', `${name}.key`, '-subj', subject, '-out', `${name}.csr`)
  await writeFile(join(dir, `${name}.ext`), extensions)
  await openssl(dir, 'x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-days', '7', '-out', `${name}.crt`, '-extfile', `${name}.ext`)
}

/**
 * A throw-away CA, the apiserver's serving cert, its service-account key pair and the admin client cert.
 * `servingIps`: addresses besides 127.0.0.1 the serving cert names (the node address and the `kubernetes`
 * Service's ClusterIP, which in-cluster clients dial).
 */
export async function createCertificates(dir: string, servingIps: readonly string[] = []): Promise<void> {
  await newKey(dir, 'ca')
  await openssl(dir, 'req', '-x509', '-new', '-key', 'ca.key', '-subj', '/CN=nfdctl-test-ca', '-days', '7', '-out', 'ca.crt')
  const inCluster = servingIps.length > 0 ? ',DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local' : ''
  const sans = `DNS:localhost${inCluster},IP:127.0.0.1${servingIps.map((ip) => `,IP:${ip}`).join('')}`
  await signed(dir, 'apiserver', '/CN=localhost', `subjectAltName=${sans}\nextendedKeyUsage=serverAuth\n`)
  await newKey(dir, 'sa')
  await openssl(dir, 'ec', '-in', 'sa.key', '-pubout', '-out', 'sa.pub')
  await mintClientCertificate(dir, 'admin', ['system:masters'])
}

/** A client certificate for `user` in `groups`, signed by the cluster CA; files `<user>.crt` and `<user>.key`. */
export async function mintClientCertificate(dir: string, user: string, groups: readonly string[]): Promise<{cert: string; key: string}> {
  if (!/^[a-z0-9][a-z0-9.:-]*$/.test(user)) throw new Error(`user name "${user}" must be lower-case letters, digits, '.', ':' or '-'`)
  const subject = `${groups.map((g) => `/O=${g}`).join('')}/CN=${user}`
  const file = user.replaceAll(':', '_')
  await signed(dir, file, subject, 'extendedKeyUsage=clientAuth\n')
  return {cert: join(dir, `${file}.crt`), key: join(dir, `${file}.key`)}
}
