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
// oclif lists commands in the order their files finished loading; sorted, the same sources give the same
// manifest byte for byte, and so the same image digest.
const commands = Object.fromEntries(Object.entries(plugin.manifest.commands).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
writeFileSync(root + 'oclif.manifest.json', JSON.stringify({...plugin.manifest, commands}, null, 2) + '\n')
