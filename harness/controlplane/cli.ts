// npm run cluster:up / cluster:down: a local control plane for the demo and for trying nfdctl by hand.
import {rm} from 'node:fs/promises'
import {join} from 'node:path'

import {ControlPlane} from './control-plane.js'
import {ensureBinaries, repoRoot} from './paths.js'

const dir = join(repoRoot, '.cluster')
const log = (line: string): void => {
  process.stderr.write(line + '\n')
}

const command = process.argv[2]
if (command === 'up') {
  await ControlPlane.stopDetached(dir)
  await rm(dir, {force: true, recursive: true})
  const binDir = await ensureBinaries(log)
  const plane = await ControlPlane.start({binDir, detached: true, dir, log})
  log(`control plane: logs in ${dir}; stop it with npm run cluster:down`)
  process.stdout.write(plane.kubeconfig + '\n')
} else if (command === 'down') {
  const stopped = await ControlPlane.stopDetached(dir)
  await rm(dir, {force: true, recursive: true})
  log(stopped ? 'control plane: stopped and removed' : 'control plane: none was running')
} else {
  log('usage: tsx harness/controlplane/cli.ts up|down')
  process.exitCode = 2
}
