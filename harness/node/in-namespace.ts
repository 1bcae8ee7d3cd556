// Runs a command inside a fresh network namespace (tests, benchmarks, node:up): kubelet, containerd, the
// control plane and the test process itself then reach only that namespace's loopback and node address.
//
//   tsx harness/node/in-namespace.ts <command> [args...]
//
// `nsenter --net`, not `ip netns exec`: the latter also remounts /sys, and kubelet and runc then see no cgroups.
// Without root (a developer's laptop) the command runs as it is, and the node tests report why they cannot run.
import {spawn} from 'node:child_process'

import {createNetns, deleteNetns, netnsPath, netnsVariable} from './netns.js'

const [command, ...args] = process.argv.slice(2)
if (command === undefined) {
  process.stderr.write('usage: tsx harness/node/in-namespace.ts <command> [args...]\n')
  process.exit(2)
}

const name = `nfdctl-test-${process.pid}`
const direct = process.env[netnsVariable] !== undefined || process.getuid?.() !== 0
if (!direct) await createNetns(name)
const child = direct
  ? spawn(command, args, {stdio: 'inherit'})
  : spawn('nsenter', [`--net=${netnsPath(name)}`, '--', command, ...args], {env: {...process.env, [netnsVariable]: name}, stdio: 'inherit'})
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => child.kill(signal))
const code = await new Promise<number>((resolve) => child.once('exit', (exitCode, signal) => resolve(exitCode ?? (signal ? 128 : 1))))
if (!direct) await deleteNetns(name)
process.exit(code)
