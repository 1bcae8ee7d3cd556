import {readFileSync} from 'node:fs'

import {runningVersionInfo} from '../lib/version-info.js'
import {renderVersion} from './render-version.js'
import {printRootHelp} from './root-help.js'

/**
 * What bin/run.js answers without starting oclif, in a packed package: the root help (`nfdctl`, `nfdctl
 * --help`, `nfdctl help`) and a plain `nfdctl version`, the first things an operator runs in a pod and what a
 * shell completion or a CronJob's first line runs. oclif's configuration (its plugins, their manifests, the
 * command index) and its help classes were most of their time, over the 1.8x of `node -e 0` the start-up
 * budget allows (bench:startup). The text is what oclif prints, byte for byte (test/e2e/node-lts.test.ts
 * compares the packed CLI's answers with and without this file). False: oclif answers.
 */
export async function answerWithoutOclif(args: readonly string[], root: URL): Promise<boolean> {
  if (args.length === 0 || (args.length === 1 && (args[0] === '--help' || args[0] === 'help'))) {
    printRootHelp(root)
    return true
  }
  if (args.length === 1 && args[0] === 'version') {
    const {version} = JSON.parse(readFileSync(new URL('package.json', root), 'utf8')) as {version: string}
    process.stdout.write(`${renderVersion(await runningVersionInfo(version), 'text')}\n`)
    return true
  }
  return false
}
