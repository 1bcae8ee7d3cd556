// Writes deploy/crds/deviceclasses.devices.nfdctl.io.yaml from src/lib/devices/device-class-schema.ts
// (`npm run generate:crd`). test/unit/devices/device-class-schema.test.ts fails while the two differ.
import {writeFile} from 'node:fs/promises'
import {fileURLToPath} from 'node:url'

import {deviceClassCrdPath, deviceClassCrdYaml} from '../src/lib/devices/device-class-crd.js'

const file = fileURLToPath(new URL(`../${deviceClassCrdPath}`, import.meta.url))
await writeFile(file, deviceClassCrdYaml())
process.stdout.write(`wrote ${deviceClassCrdPath}\n`)
