import {expect} from 'chai'

import {returnIdleMemory} from '../../../src/lib/memory.js'
import {isRootMount, rootfsMount} from '../../../src/lib/runtime/container-rootfs.js'

const id = '3f5c0e1d9a7b'
/** A node's mount table: the host's root, a pod's emptyDir, and containerd's rootfs mounts. */
const table = [
  '22 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw',
  '610 22 259:2 /var/lib/kubelet/pods/0d1f/volumes/kubernetes.io~empty-dir/data /var/lib/kubelet/pods/0d1f/volumes/kubernetes.io~empty-dir/data rw shared:1 - ext4 /dev/nvme0n1p2 rw',
  `700 25 0:91 / /run/containerd/io.containerd.runtime.v2.task/k8s.io/${id}/rootfs rw,relatime shared:300 - overlay overlay rw,lowerdir=/a,upperdir=/b,workdir=/c`,
  `701 25 0:92 / /run/containerd/io.containerd.runtime.v2.task/k8s.io/other${id}/rootfs rw shared:301 - overlay overlay rw`,
  `702 25 0:93 / /tmp/state\\040dir/io.containerd.runtime.v2.task/moby/spaced-${id}/rootfs rw shared:302 - overlay overlay rw`,
].join('\n')

describe('rootfsMount', function () {
  it("finds the container's rootfs under containerd's task state, by its whole id, with its device", function () {
    expect(rootfsMount(table, id)).to.deep.equal({dev: '0:91', mountPoint: `/run/containerd/io.containerd.runtime.v2.task/k8s.io/${id}/rootfs`})
    expect(rootfsMount(table, `other${id}`)).to.deep.equal({dev: '0:92', mountPoint: `/run/containerd/io.containerd.runtime.v2.task/k8s.io/other${id}/rootfs`})
  })

  it('reads escaped mount points, in any containerd namespace', function () {
    expect(rootfsMount(table, `spaced-${id}`)?.mountPoint).to.equal(`/tmp/state dir/io.containerd.runtime.v2.task/moby/spaced-${id}/rootfs`)
  })

  it('nothing for a container without a rootfs mount, or a rootfs outside containerd task state', function () {
    expect(rootfsMount(table, 'absent')).to.equal(undefined)
    expect(rootfsMount(`800 22 0:95 / /var/lib/other/k8s.io/${id}/rootfs rw - overlay overlay rw`, id)).to.equal(undefined)
    expect(rootfsMount(`800 22 0:95 / /run/containerd/io.containerd.runtime.v2.task/${id}/rootfs rw - overlay overlay rw`, id)).to.equal(undefined)
  })

  it("keeps no mount table alive: the mount point is a string of its own, not a slice of the table's text", function () {
    // A node's table with many mounts (here 130 KB); the agent keeps one rootfs per container, each found in
    // the table as it was read for that container.
    const filler = Array.from({length: 2000}, (_, i) => `${900 + i} 25 0:${i} / /var/lib/kubelet/pods/${i}/volumes/v rw - tmpfs tmpfs rw`).join('\n')
    returnIdleMemory()
    const before = process.memoryUsage().heapUsed
    const kept = Array.from({length: 50}, (_, i) => rootfsMount(`${filler}\n${i}\n${table}`, id))
    returnIdleMemory()
    const retainedMb = (process.memoryUsage().heapUsed - before) / 1048576
    expect(kept.every((rootfs) => rootfs?.mountPoint.endsWith(`/${id}/rootfs`))).to.equal(true)
    // Sliced from their tables, the 50 mount points would keep 50 x 130 KB, about 6 MB.
    expect(retainedMb).to.be.lessThan(2)
  })
})

describe('isRootMount', function () {
  // A container's own table: its rootfs at /, a volume at /data; mount points are relative to the process's root.
  const own = ['1200 1100 0:91 / / rw,relatime - overlay overlay rw', '1201 1200 259:2 /var/lib/kubelet/pods/0d1f/volumes/kubernetes.io~empty-dir/data /data rw - ext4 /dev/nvme0n1p2 rw'].join('\n')

  it('the mount at / whose root is its filesystem top is the root mount; another mount is not', function () {
    expect(isRootMount(own, 1200n)).to.equal(true)
    expect(isRootMount(own, 1201n)).to.equal(false)
    expect(isRootMount(own, 999n)).to.equal(false)
  })

  it('a bind mount of a subdirectory at / is not the top of its filesystem', function () {
    expect(isRootMount('1300 1100 0:91 /jail / rw - overlay overlay rw', 1300n)).to.equal(false)
  })
})
