import {readdir, readFile} from 'node:fs/promises'
import {join} from 'node:path'

import type {Platform} from './platforms.js'

/** The parts of a package-lock.json (lockfileVersion 3) entry that decide whether it is installed here. */
interface LockEntry {
  version?: string
  dev?: boolean
  optional?: boolean
  os?: string[]
  cpu?: string[]
  libc?: string[]
}

/**
 * What differs between a production install and its lockfile, for one platform: every non-dev package
 * the lockfile lists for Linux, this CPU and glibc must be installed at its locked version, and nothing else
 * may be (a platform package of another CPU, a dev dependency, a package the lockfile does not name).
 * Empty when they are identical.
 */
export function productionDifferences(lockPackages: Record<string, LockEntry>, installed: ReadonlyMap<string, string>, platform: Platform): string[] {
  const problems: string[] = []
  const expected = new Map<string, string>()
  for (const [path, entry] of Object.entries(lockPackages)) {
    if (!path.startsWith('node_modules/') && !path.includes('/node_modules/')) continue
    if (entry.dev === true) continue
    const forHere =
      (entry.os === undefined || entry.os.includes('linux')) && (entry.cpu === undefined || entry.cpu.includes(platform.node)) && (entry.libc === undefined || entry.libc.includes('glibc'))
    if (!forHere && entry.optional === true) continue
    expected.set(path, entry.version ?? '')
  }
  for (const [path, version] of expected) {
    const actual = installed.get(path)
    if (actual === undefined) problems.push(`${path} ${version} is locked but not installed`)
    else if (actual !== version) problems.push(`${path} is ${actual}, locked at ${version}`)
  }
  for (const [path, version] of installed) if (!expected.has(path)) problems.push(`${path} ${version} is installed but not a locked production package for linux/${platform.node}`)
  return problems.sort()
}

/** Every package under `<dir>/node_modules`, nested ones included: `node_modules/a/node_modules/b` → version. */
export async function installedPackages(dir: string, prefix = ''): Promise<Map<string, string>> {
  const found = new Map<string, string>()
  const modules = join(dir, 'node_modules')
  const names = await readdir(modules).catch(() => [] as string[])
  for (const name of names.sort()) {
    if (name.startsWith('.')) continue
    const packages = name.startsWith('@') ? (await readdir(join(modules, name))).sort().map((inner) => `${name}/${inner}`) : [name]
    for (const pkg of packages) {
      const path = `${prefix}node_modules/${pkg}`
      const manifest = JSON.parse(await readFile(join(modules, pkg, 'package.json'), 'utf8')) as {version?: string}
      found.set(path, manifest.version ?? '')
      for (const [nested, version] of await installedPackages(join(modules, pkg), `${path}/`)) found.set(nested, version)
    }
  }
  return found
}
