import {createRequire} from 'node:module'

import type * as YamlModule from 'yaml'

// yaml is 73 modules: 13-18 ms of start-up after a command's other imports (36 ms alone). A daemon running in
// the cluster (service-account credentials, no class files, no YAML output) never parses YAML, so yaml is
// loaded on first use, and synchronously: kubeconfig resolution is synchronous.
let loaded: typeof YamlModule | undefined

export function yaml(): typeof YamlModule {
  loaded ??= createRequire(import.meta.url)('yaml') as typeof YamlModule
  return loaded
}
