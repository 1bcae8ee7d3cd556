// Writes oclif.manifest.json from the compiled commands in dist/ (run after `tsc`, at pack time only:
// a manifest left in the tree makes dev runs and tests load stale dist/ code).
import {Plugin} from '@oclif/core'
import {rmSync, writeFileSync} from 'node:fs'

const root = new URL('..', import.meta.url).pathname
rmSync(root + 'oclif.manifest.json', {force: true})
const plugin = new Plugin({errorOnManifestCreate: true, ignoreManifest: true, respectNoCacheDefault: true, root, type: 'core'})
await plugin.load()
if (Object.keys(plugin.manifest.commands).length === 0) {
  console.error('manifest: no commands found in dist/; run `npm run build` first')
  process.exit(1)
}
writeFileSync(root + 'oclif.manifest.json', JSON.stringify(plugin.manifest, null, 2) + '\n')
