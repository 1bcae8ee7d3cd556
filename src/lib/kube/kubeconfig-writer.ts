import {readFile, realpath, stat} from 'node:fs/promises'

import {ConfigError, errorMessage} from '../errors.js'
import {writeFileAtomic} from '../sys/atomic-write.js'
import {yaml} from '../yaml.js'

/**
 * Sets keys of one user's `auth-provider.config` in the kubeconfig file that defines the user, as client-go's
 * persister does after an OIDC refresh. Only those keys change: comments and the rest of the file are kept
 * (kubectl re-serializes the whole file). Replaced atomically, keeping the file's mode and owner: root
 * refreshing a user's kubeconfig must not leave it unreadable to that user. A symlinked kubeconfig (a
 * dotfiles checkout, a mounted Secret) stays a symlink: its target is replaced, in the target's directory.
 */
export async function writeAuthProviderConfig(file: string, userName: string, values: Readonly<Record<string, string>>): Promise<void> {
  const where = `kubeconfig ${file}`
  let owner: {uid: number; gid: number} | undefined
  try {
    const target = await realpath(file)
    const {isMap, isSeq, parseDocument} = yaml()
    const doc = parseDocument(await readFile(target, 'utf8'))
    const users = doc.get('users')
    const user = isSeq(users) ? users.items.find((item) => isMap(item) && item.get('name') === userName) : undefined
    if (!isMap(user)) throw new Error(`it has no user "${userName}" any more`)
    for (const [key, value] of Object.entries(values)) user.setIn(['user', 'auth-provider', 'config', key], value)
    const {gid, mode, uid} = await stat(target)
    owner = {gid, uid}
    // kubectl's own layout: sequences not indented, flow maps without padding; the rest of the file is kept.
    await writeFileAtomic(target, doc.toString({flowCollectionPadding: false, indentSeq: false, lineWidth: 0}), {mode: mode & 0o777, owner})
  } catch (error) {
    const fix = owner && (error as NodeJS.ErrnoException).code === 'EPERM' ? ` (it belongs to uid ${owner.uid}, gid ${owner.gid}: run as that user or as root)` : ''
    throw new ConfigError(`${where}: cannot write the refreshed oidc tokens of user "${userName}": ${errorMessage(error)}${fix}`, {cause: error})
  }
}
