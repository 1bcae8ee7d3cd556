// `npm run image`: builds the oci-archive and prints its path as the last line of stdout; progress on stderr.
import {execFileSync} from 'node:child_process'
import {parseArgs} from 'node:util'

import {buildImage, fetchImageInputs, repoRoot} from './build.js'
import {loadIntoContainerd} from './load.js'
import {allArchitectures, parsePlatform, type Platform} from './platforms.js'

const usage = `Usage: npm run image -- [--tag <ref>] [--out <dir>] [--commit <rev>] [--platform <os/arch>]... [--load <containerd socket>] [--refresh-debian]
       npm run image -- --fetch-only [--platform <os/arch>]...

  --tag             image reference the archive names (default ghcr.io/nfdctl/nfdctl:<package.json version>)
  --out             directory for the archive (default dist-image/)
  --commit          the commit to build (default HEAD; uncommitted changes are never in the image)
  --platform        linux/amd64 or linux/arm64, repeatable (default both)
  --load            import the archive into this containerd's k8s.io namespace (ctr images import)
  --refresh-debian  resolve the Debian packages again from the signed indexes and rewrite scripts/image/debian.lock.json
  --fetch-only      download what a build needs (Node runtimes, Debian packages, npm packages) and build nothing`

// A reference as containerd and registries take it: lower-case path components, then a tag.
const reference = /^[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?(\/[a-z0-9]+([._-][a-z0-9]+)*)*:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/

function fail(message: string): never {
  process.stderr.write(`${message}\n`)
  process.exit(2)
}

let parsed: ReturnType<typeof parse>
function parse() {
  return parseArgs({
    options: {
      commit: {type: 'string'},
      'fetch-only': {type: 'boolean'},
      help: {short: 'h', type: 'boolean'},
      load: {type: 'string'},
      out: {type: 'string'},
      platform: {multiple: true, type: 'string'},
      'refresh-debian': {type: 'boolean'},
      tag: {type: 'string'},
    },
    strict: true,
  })
}
try {
  parsed = parse()
} catch (error) {
  fail(`${(error as Error).message} (npm run image -- --help)`)
}
const {values} = parsed
if (values.help) {
  process.stdout.write(`${usage}\n`)
  process.exit(0)
}
if (values.tag !== undefined && !reference.test(values.tag)) fail(`--tag must be an image reference with a tag, such as localhost/nfdctl:dev; got "${values.tag}"`)
const architectures = (values.platform ?? []).map((text): Platform['architecture'] => {
  const platform = parsePlatform(text)
  if (platform === undefined) fail(`--platform must be one of ${allArchitectures.map((a) => `linux/${a}`).join(', ')}; got "${text}"`)
  return platform.architecture
})

if (values.commit !== undefined) {
  try {
    execFileSync('git', ['-C', repoRoot, 'rev-parse', '--verify', '--quiet', `${values.commit}^{commit}`], {stdio: 'ignore'})
  } catch {
    fail(`--commit "${values.commit}" names no commit in ${repoRoot.replace(/\/$/, '')} (git log lists them)`)
  }
}

if (values['fetch-only']) {
  try {
    await fetchImageInputs({architectures: architectures.length > 0 ? [...new Set(architectures)] : undefined, refreshDebian: values['refresh-debian']})
  } catch (error) {
    process.stderr.write(`image: ${(error as Error).message}\n`)
    process.exit(1)
  }
  process.exit(0)
}

let built: Awaited<ReturnType<typeof buildImage>>
try {
  built = await buildImage({
    architectures: architectures.length > 0 ? [...new Set(architectures)] : undefined,
    commit: values.commit,
    outDir: values.out,
    ref: values.tag,
    refreshDebian: values['refresh-debian'],
  })
  if (values.load !== undefined) {
    process.stderr.write(`image: loading ${built.ref} into ${values.load} (namespace k8s.io)\n`)
    await loadIntoContainerd(built.archive, values.load, (line) => process.stderr.write(`  ${line}\n`))
  }
} catch (error) {
  process.stderr.write(`image: ${(error as Error).message}\n`)
  process.exit(1)
}
for (const p of built.platforms) process.stderr.write(`image: ${p.platform} ${p.manifestDigest} ${(p.compressedSize / 1e6).toFixed(1)} MB compressed\n`)
process.stderr.write(`image: ${built.ref} ${built.indexDigest}\n`)
process.stdout.write(`${built.archive}\n`)
