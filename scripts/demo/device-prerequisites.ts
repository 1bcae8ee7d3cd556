// What the demo's device half needs on this machine beyond what the GC half needs (Node, Go, openssl).
import {accessSync, closeSync, constants, openSync} from 'node:fs'
import {delimiter, join} from 'node:path'

/** One thing the local node cannot start without, and the Debian package that brings it. */
interface Need {
  /** How the notice names it. */
  readonly name: string
  /** A command looked up on the PATH, or an absolute path. */
  readonly find: string
  readonly debianPackage: string
}

/**
 * What harness/node (runc under the containerd built with the control plane, kubelet, the pod network, the
 * busybox image) and the hot-plug use.
 */
export const deviceHalfNeeds: readonly Need[] = [
  {debianPackage: 'runc', find: 'runc', name: 'runc'},
  {debianPackage: 'busybox-static', find: '/bin/busybox', name: 'busybox-static'},
  {debianPackage: 'containernetworking-plugins', find: '/usr/lib/cni/bridge', name: 'the CNI bridge plugin'},
  {debianPackage: 'iptables', find: 'iptables', name: 'iptables'},
  {debianPackage: 'iproute2', find: 'ip', name: 'ip'},
  {debianPackage: 'mount', find: 'losetup', name: 'losetup'},
  {debianPackage: 'util-linux', find: 'nsenter', name: 'nsenter'},
  // The image build: Debian's packages unpacked and their indexes checked, layers compressed.
  {debianPackage: 'dpkg', find: 'dpkg-deb', name: 'dpkg-deb'},
  {debianPackage: 'gzip', find: 'gzip', name: 'gzip'},
  {debianPackage: 'xz-utils', find: 'xz', name: 'xz'},
  {debianPackage: 'gpgv', find: 'gpgv', name: 'gpgv'},
  {debianPackage: 'debian-archive-keyring', find: '/usr/share/keyrings/debian-archive-keyring.gpg', name: "Debian's archive keyring"},
]

/** The Debian packages that bring what is missing, each once; empty when nothing is. */
export function missingPackages(probe: MachineProbe): string[] {
  return [...new Set(deviceHalfNeeds.filter((need) => !probe.has(need.find)).map((need) => need.debianPackage))]
}

export interface MachineProbe {
  /** process.getuid(); undefined where there is none (not Linux). */
  readonly uid: number | undefined
  /** Whether a command (on the PATH) or an absolute path is there. */
  readonly has: (find: string) => boolean
  /** Whether /dev/loop-control opens for writing (root, and the loop driver). */
  readonly loopControl: boolean
}

/**
 * The one line the demo prints when the device half cannot run here, naming everything missing at once;
 * undefined when it can run.
 */
export function deviceHalfNotice(probe: MachineProbe): string | undefined {
  const root = probe.uid === 0
  const missing = deviceHalfNeeds.filter((need) => !probe.has(need.find))
  const loop = root && !probe.loopControl
  if (root && missing.length === 0 && !loop) return undefined
  const packages = [...new Set(missing.map((need) => need.debianPackage))]
  const wants = [...(root ? [] : ['root']), ...missing.map((need) => need.name), ...(loop ? ['a usable /dev/loop-control (modprobe loop)'] : [])]
  const hints = [...(packages.length > 0 ? [`apt-get install ${packages.join(' ')}`] : []), ...(root ? [] : ['sudo npm run demo'])]
  return `the device half needs ${listed(wants)}${hints.length > 0 ? ` (${hints.join('; then ')})` : ''}; showing the GC half only`
}

function listed(items: readonly string[]): string {
  return items.length < 2 ? items.join('') : `${items.slice(0, -1).join(', ')} and ${items.at(-1)}`
}

/** This machine, as deviceHalfNotice asks about it. The sbin directories count even when PATH lacks them (a user's PATH often does; sudo's has them). */
export function probeMachine(): MachineProbe {
  const dirs = [...(process.env.PATH ?? '').split(delimiter).filter(Boolean), '/usr/local/sbin', '/usr/sbin', '/sbin']
  const executable = (path: string): boolean => {
    try {
      accessSync(path, constants.X_OK)
      return true
    } catch {
      return false
    }
  }
  const loopControl = ((): boolean => {
    try {
      closeSync(openSync('/dev/loop-control', 'r+'))
      return true
    } catch {
      return false
    }
  })()
  const present = (path: string): boolean => {
    try {
      accessSync(path, constants.R_OK)
      return true
    } catch {
      return false
    }
  }
  // An absolute path names a file (the keyring) or a program; a bare name is looked up on the PATH.
  return {has: (find) => (find.startsWith('/') ? present(find) : dirs.some((dir) => executable(join(dir, find)))), loopControl, uid: process.getuid?.()}
}
