import {hostname} from 'node:os'
import {randomBytes} from 'node:crypto'

import {kubeFlags} from '../../cli/kube-flags.js'
import {NfdctlCommand} from '../../cli/nfdctl-command.js'
import {runFlags} from '../../cli/run-flags.js'
import {collectFlags} from '../../cli/sweep-flags.js'
import {untilAborted} from '../../lib/abort.js'
import {AbortedError} from '../../lib/errors.js'
import {Collector} from '../../lib/gc/collector.js'
import {createGcMetrics} from '../../lib/gc/metrics.js'
import {runOptionsFrom} from '../../lib/gc/run-options.js'
import {openCluster} from '../../lib/kube/connect.js'
import {LeaderElector} from '../../lib/kube/leader-elector.js'
import {ownNamespace} from '../../lib/kube/namespace.js'
import {HealthServer} from '../../lib/observe/health-server.js'
import {createLogger} from '../../lib/observe/logger.js'
import {NativeMemoryTrim} from '../../lib/native-memory.js'
import {Registry} from '../../lib/observe/prometheus.js'

export default class GcRun extends NfdctlCommand {
  static override description = `The long-running garbage collector: delete NodeFeature and NodeResourceTopology objects whose Node is gone.

Watches Nodes (metadata only) and collects a deleted node's objects at once; a burst of deletions is handled as one batch, a mass scale-down as one sweep. A full sweep also runs every --interval. An object is deleted only after it was seen stale twice, --grace-period apart, and only with the UID that was seen. With --leader-elect, only the holder of a coordination.k8s.io Lease deletes. SIGTERM/SIGINT stop it cleanly (exit 0).`
  static override examples = [
    '<%= config.bin %> <%= command.id %> --interval 10m',
    '<%= config.bin %> <%= command.id %> --leader-elect --leader-elect-namespace node-feature-discovery --metrics-bind-address 127.0.0.1:8081',
  ]
  static override flags = {...kubeFlags, ...collectFlags, ...runFlags}

  async run(): Promise<void> {
    const {flags} = await this.parse(GcRun)
    const options = runOptionsFrom(flags, Boolean(process.stdout.isTTY))
    const log = createLogger({base: {component: 'gc'}, format: options.logFormat, level: options.logLevel})
    const {client, namespace, origin} = await openCluster({context: flags.context, kubeconfig: flags.kubeconfig}, {burst: options.burst, maxConnections: options.concurrency + 2, qps: options.qps})
    const registry = new Registry()
    const metrics = createGcMetrics(registry, this.config.version, () => client.window)
    const trim = new NativeMemoryTrim(log, 0)
    const newCollector = (): Collector =>
      new Collector({
        client,
        concurrency: options.concurrency,
        graceMs: options.graceMs,
        intervalMs: options.intervalMs,
        kinds: options.kinds,
        listSize: options.listSize,
        logger: log,
        metrics,
        plan: options,
        trim,
      })

    let collector: Collector | undefined
    let elector: LeaderElector | undefined
    const election = options.leaderElection
    if (election) {
      elector = new LeaderElector({
        ...election,
        client,
        identity: `${hostname()}_${randomBytes(4).toString('hex')}`,
        logger: log,
        namespace: election.namespace ?? ownNamespace(process.env, '', namespace),
        onStartedLeading: async (signal) => {
          metrics.leader.set(1)
          collector = newCollector()
          await collector.start(signal).catch((error: unknown) => {
            if (!(error instanceof AbortedError)) throw error
          })
        },
        onStoppedLeading: async () => {
          metrics.leader.set(0)
          await collector?.stop()
          collector = undefined
        },
      })
    }

    const server = new HealthServer({
      host: options.metricsHost,
      port: options.metricsPort,
      readiness: () => {
        if (elector && !elector.healthy) return {ready: false, reason: 'cannot read or update the leader lease (see the logs)'}
        if (elector && !elector.isLeader) return {ready: true, reason: 'standing by: another replica leads'}
        return collector?.status() ?? {ready: false, reason: 'starting'}
      },
      registry,
    })
    if (options.metricsPort > 0) await server.start()
    log.info(
      {
        gracePeriod: flags['grace-period'],
        interval: flags.interval,
        kinds: options.kinds.map((k) => k.kind),
        leaderElect: Boolean(election),
        metricsHost: options.metricsHost,
        metricsPort: options.metricsPort,
        origin,
      },
      'gc run starting',
    )

    if (elector) {
      elector.start(this.signal)
    } else {
      metrics.leader.set(1)
      collector = newCollector()
      await collector.start(this.signal).catch((error: unknown) => {
        if (!(error instanceof AbortedError)) throw error
      })
    }
    await untilAborted(this.signal)
    log.info({reason: this.signal.reason instanceof Error ? this.signal.reason.message : String(this.signal.reason)}, 'shutting down')
    await elector?.stop()
    await collector?.stop()
    await server.stop()
    client.close()
    log.info({}, 'stopped')
  }
}
