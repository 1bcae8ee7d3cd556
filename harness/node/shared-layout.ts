import {mkdir, symlink} from 'node:fs/promises'
import {join} from 'node:path'

import type {TestNode} from './node.js'
import type {NodeLayout} from './workloads.js'

/** A node of a shared layout, and the directory that holds what its DaemonSet pods keep (state/, udev/). */
export interface LayoutNode {
  readonly node: TestNode
  readonly ownDir: string
}

/**
 * One set of host paths for several test nodes, as the nodes of a real cluster have (/run/containerd and
 * /var/lib/kubelet on each), so that one DaemonSet's hostPaths serve them all. The test nodes keep those
 * directories in different places of one host: `dir` holds a link per directory to the first node's, and in
 * each further node's mount namespace a directory of links to that node's own is mounted over `dir`. Whatever
 * resolves a path on a node's behalf runs in its namespace (kubelet's hostPath type checks, containerd
 * resolving a mount's host path, runc's bind mounts, kubelet dialling the socket path a DRA driver registers),
 * so each sees its own node's directories under the same names.
 */
export class SharedLayout {
  private constructor(readonly dir: string) {}

  /** `nodes[0]` must be a node on the host's mount namespace; every further one runs in its own. */
  static async create(dir: string, nodes: readonly LayoutNode[]): Promise<SharedLayout> {
    const [first, ...further] = nodes
    if (first === undefined || first.node.mountNamespace !== undefined) throw new Error('shared layout: the first node must run in the host mount namespace')
    await linkDirs(dir, first)
    for (const entry of further) {
      const namespace = entry.node.mountNamespace
      if (namespace === undefined) throw new Error(`shared layout: node ${entry.node.name} has no mount namespace of its own to mount its links in`)
      const own = `${dir}.${entry.node.name}`
      await linkDirs(own, entry)
      await namespace.bind(own, dir)
    }
    return new SharedLayout(dir)
  }

  /** For nodeLayoutPatch: every path below `dir`. */
  get layout(): NodeLayout {
    return {cdiDir: join(this.dir, 'cdi'), containerdDir: join(this.dir, 'containerd'), dir: this.dir, podResourcesDir: join(this.kubeletDir, 'pod-resources')}
  }

  /** kubelet's --root-dir as every node's kubelet resolves it (for kubeletDirPatch). */
  get kubeletDir(): string {
    return join(this.dir, 'kubelet')
  }
}

/** The link directory of one node: names as `SharedLayout.layout` gives them, each to the node's directory. */
async function linkDirs(dir: string, {node, ownDir}: LayoutNode): Promise<void> {
  await mkdir(dir, {recursive: true})
  const targets = {
    cdi: node.cdiDir,
    containerd: join(node.containerd.options.dir, 'run'),
    kubelet: node.kubelet.rootDir,
    state: join(ownDir, 'state'),
    udev: join(ownDir, 'udev'),
  }
  await mkdir(join(ownDir, 'state'), {recursive: true})
  // The agent reads udev's database at /run/udev/data.
  await mkdir(join(ownDir, 'udev', 'data'), {recursive: true})
  for (const [name, target] of Object.entries(targets)) await symlink(target, join(dir, name))
}
