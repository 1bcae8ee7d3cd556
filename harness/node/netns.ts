import {execFile} from 'node:child_process'
import {stat} from 'node:fs/promises'
import {promisify} from 'node:util'

const run = promisify(execFile)

/** The variable the launcher (in-namespace.ts) sets for everything it runs inside the test namespace. */
export const netnsVariable = 'NFDCTL_TEST_NETNS'

/**
 * The node's address, on the test namespace's lo: kubelet refuses a loopback node IP, and an address
 * inside a namespace the test run created is the only other place test traffic may go.
 */
export const nodeIp = '10.223.255.1'

/**
 * The address of the test node `index` (0, the first, has nodeIp): further nodes add theirs to the test
 * namespace's lo, so that each kubelet has its own node IP and port 10250.
 */
export function nodeIpOf(index: number): string {
  return index === 0 ? nodeIp : `10.223.255.${index + 1}`
}

/**
 * Adds a further node's address to the test namespace's lo (kept when it is there already). Refused outside
 * that namespace: the address must never land on the host's lo.
 */
export async function addNodeIp(address: string): Promise<void> {
  const outside = await outsideTestNetns()
  if (outside !== undefined) throw new Error(`cannot add node address ${address}: ${outside}`)
  const present = (await run('ip', ['-o', 'addr', 'show', 'dev', 'lo'])).stdout.includes(` ${address}/32 `)
  if (!present) await run('ip', ['addr', 'add', `${address}/32`, 'dev', 'lo'])
}

export async function removeNodeIp(address: string): Promise<void> {
  if ((await outsideTestNetns()) !== undefined) return
  await run('ip', ['addr', 'del', `${address}/32`, 'dev', 'lo']).catch(() => {})
}

export const netnsPath = (name: string): string => `/run/netns/${name}`

/** A fresh network namespace with lo up and the node address on it: nothing in it can reach another host. */
export async function createNetns(name: string): Promise<void> {
  await run('ip', ['netns', 'add', name])
  try {
    await run('ip', ['-n', name, 'link', 'set', 'lo', 'up'])
    await run('ip', ['-n', name, 'addr', 'add', `${nodeIp}/32`, 'dev', 'lo'])
  } catch (error) {
    await deleteNetns(name)
    throw error
  }
}

/** Deletes the namespace (its bridge and veths go with it). */
export async function deleteNetns(name: string): Promise<void> {
  await run('ip', ['netns', 'delete', name]).catch(() => {})
}

/**
 * Why this process may not start network components, or undefined when it runs inside the test namespace
 * named by NFDCTL_TEST_NETNS (compared by inode, not trusted from the variable alone).
 */
export async function outsideTestNetns(): Promise<string | undefined> {
  const name = process.env[netnsVariable]
  if (!name) return 'not inside a test network namespace: run through harness/node/in-namespace.ts (npm test, npm run node:up)'
  const [mine, theirs] = await Promise.all([stat('/proc/self/ns/net').catch(() => undefined), stat(netnsPath(name)).catch(() => undefined)])
  if (mine === undefined || theirs === undefined || mine.ino !== theirs.ino) return `${netnsVariable}=${name} is set, but this process is not in that network namespace`
  return undefined
}
