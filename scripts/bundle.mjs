// Bundles the compiled CLI in dist/ at pack time (after `tsc` and the oclif manifest): one file per command,
// one for oclif's runner and one for what bin/run.js answers without oclif, the code they share in
// dist/chunks/. A command loads only the chunks it imports, and reads a few files where tsc's output and
// the dependencies were hundreds (bench:startup, docs/benchmarks.md). The manifest's paths (dist/commands/…) stay valid: every command is an entry point
// written where tsc wrote it.
import {mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync} from 'node:fs'
import {isBuiltin} from 'node:module'
import {dirname, join, relative, sep} from 'node:path'

import {build} from 'esbuild'

const root = new URL('..', import.meta.url).pathname
const dist = join(root, 'dist')
const staging = join(root, 'dist-bundle')

/** Loaded from node_modules at run time: native code, or files they find by path, or optional requires. */
const external = ['koffi', '@grpc/grpc-js', '@grpc/proto-loader', 'protobufjs', 'pino', 'prom-client']
/** What oclif looks for only when run from TypeScript sources (bin/dev.js); absent from an installed package. */
const developmentOnly = ['typescript', 'ts-node']

const commandFiles = (dir) =>
  readdirSync(dir, {withFileTypes: true}).flatMap((entry) => {
    const path = join(dir, entry.name)
    if (entry.isDirectory()) return commandFiles(path)
    return entry.name.endsWith('.js') ? [path] : []
  })

// A module that finds files beside it (proto/, build-info.json) or resolves packages from where it is reads
// import.meta.url. In a bundle that would be the URL of whichever chunk it landed in, so each module's own
// URL, as tsc laid it out, is marked here and written out relative to its chunk once the chunks are known.
const moduleUrlMark = 'NFDCTL_MODULE_URL'
const keepModuleUrl = {
  name: 'keep-module-url',
  setup(build) {
    build.onLoad({filter: /\.js$/}, (args) => {
      if (!args.path.startsWith(dist + sep)) return undefined
      const source = readFileSync(args.path, 'utf8')
      if (!source.includes('import.meta.url')) return undefined
      const path = relative(dist, args.path).split(sep).join('/')
      const contents = source
        // lib/yaml.ts loads yaml on first use; as a require() esbuild sees, yaml goes into the bundle and
        // still runs only when first called (73 files from node_modules were 25-29 ms of gc once's start).
        .replaceAll("createRequire(import.meta.url)('yaml')", "require('yaml')")
        .replaceAll('import.meta.url', `${moduleUrlMark}(${JSON.stringify(path)})`)
      return {contents, loader: 'js'}
    })
  },
}

// An ES module import of a Node built-in makes Node build the module's namespace, reading every export, and
// some exports are getters that load more: node:http's fetch and WebSocket load undici (30-70 ms),
// node:crypto's webcrypto and subtle load the Web Crypto implementation, which nfdctl never uses. In the
// bundle each built-in an ES module imports is the CommonJS object process.getBuiltinModule returns, whose
// properties are read only where they are used.
const builtinsWithoutNamespace = {
  name: 'builtins-without-namespace',
  setup(build) {
    build.onResolve({filter: /^(node:)?[a-z_]+(\/[a-z_]+)*$/}, (args) => {
      if (args.kind !== 'import-statement' && args.kind !== 'dynamic-import') return undefined
      const name = args.path.startsWith('node:') ? args.path : `node:${args.path}`
      return isBuiltin(name) ? {namespace: 'node-builtin', path: name} : undefined
    })
    build.onLoad({filter: /.*/, namespace: 'node-builtin'}, (args) => ({contents: `module.exports = process.getBuiltinModule(${JSON.stringify(args.path)})`, loader: 'js'}))
  },
}

rmSync(staging, {force: true, recursive: true})
const result = await build({
  banner: {js: "import {createRequire as __nfdctlCreateRequire} from 'node:module'; const require = __nfdctlCreateRequire(import.meta.url);"},
  bundle: true,
  chunkNames: 'chunks/[name]-[hash]',
  entryPoints: [...commandFiles(join(dist, 'commands')), join(dist, 'cli', 'execute.js'), join(dist, 'cli', 'before-oclif.js'), join(dist, 'cli', 'daemon-node-flags.js')],
  external: [...external, ...developmentOnly],
  format: 'esm',
  legalComments: 'none',
  logLevel: 'warning',
  minify: true,
  outbase: dist,
  outdir: staging,
  platform: 'node',
  plugins: [keepModuleUrl, builtinsWithoutNamespace],
  splitting: true,
  target: 'node20',
  write: false,
})

for (const file of result.outputFiles) {
  const toDist = relative(dirname(file.path), staging).split(sep).join('/') || '.'
  const text = file.text.replace(new RegExp(`${moduleUrlMark}\\("([^"]+)"\\)`, 'g'), (_, path) => `new URL(${JSON.stringify(`${toDist}/${path}`)},import.meta.url).href`)
  if (text.includes(moduleUrlMark)) throw new Error(`bundle: ${relative(staging, file.path)} keeps a ${moduleUrlMark} the pattern missed`)
  mkdirSync(dirname(file.path), {recursive: true})
  writeFileSync(file.path, text)
}
// Only the bundle, the commit record and the root help's content go in the package: tsc's modules,
// declarations and maps are all in it.
for (const file of ['build-info.json', 'root-help.json']) renameSync(join(dist, file), join(staging, file))
rmSync(dist, {recursive: true})
renameSync(staging, dist)
