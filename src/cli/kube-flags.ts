import * as Flags from '@oclif/core/flags'

import {UsageError} from '../lib/errors.js'

function numberFlag(flag: string) {
  return async (input: string): Promise<number> => {
    const value = Number(input)
    if (input.trim() === '' || !Number.isFinite(value)) throw new UsageError(`--${flag} must be a number, got "${input}"`)
    return value
  }
}

/** Which cluster: every command that talks to the API server. */
export const clusterFlags = {
  context: Flags.string({description: 'kubeconfig context to use (default: current-context)', helpGroup: 'KUBERNETES'}),
  kubeconfig: Flags.string({description: 'path to the kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster)', helpGroup: 'KUBERNETES'}),
}

/** Connection flags of the commands that pace their own API requests (gc). */
export const kubeFlags = {
  ...clusterFlags,
  burst: Flags.integer({description: 'with --qps: requests allowed at once above it (default: --qps)', helpGroup: 'KUBERNETES'}),
  qps: Flags.custom<number>({
    description: 'client-side cap on API requests per second (default: none; the server paces us with 429s)',
    helpGroup: 'KUBERNETES',
    parse: numberFlag('qps'),
  })(),
}

export {numberFlag}
