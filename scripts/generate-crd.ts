// Writes deploy/crds/deviceclasses.devices.nfdctl.io.yaml and the chart's copy from
// src/lib/devices/device-class-schema.ts (`npm run generate:crd`). test/unit/devices/device-class-schema.test.ts
// fails while the first differs, the chart drift test while the copy does.
import {writeFile} from 'node:fs/promises'
import {basename} from 'node:path'
import {fileURLToPath} from 'node:url'

import {deviceClassCrdPath, deviceClassCrdYaml} from '../src/lib/devices/device-class-crd.js'

for (const path of [deviceClassCrdPath, `charts/nfdctl/crds/${basename(deviceClassCrdPath)}`]) {
  await writeFile(fileURLToPath(new URL(`../${path}`, import.meta.url)), deviceClassCrdYaml())
  process.stdout.write(`wrote ${path}\n`)
}
