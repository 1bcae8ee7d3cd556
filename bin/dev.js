#!/usr/bin/env node
// Runs the TypeScript sources through tsx (oclif maps dist/commands to src/commands in development).
import {execute} from '@oclif/core/execute'

await execute({development: true, dir: import.meta.url})
