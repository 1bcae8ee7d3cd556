// Writes dist/root-help.json at pack time (after `tsc` and the oclif manifest, before the bundle): what oclif's
// root help lists, from oclif itself, for bin/run.js to print without starting oclif (src/cli/root-help.ts).
import {writeFileSync} from 'node:fs'

import {Config} from '@oclif/core/config'

const root = new URL('..', import.meta.url)
const config = await Config.load(root.pathname)
const {rootHelpContent} = await import(new URL('dist/cli/root-help-content.js', root).href)
writeFileSync(new URL('dist/root-help.json', root), JSON.stringify(await rootHelpContent(config), null, 2) + '\n')
