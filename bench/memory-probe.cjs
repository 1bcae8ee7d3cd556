// Preloaded into a process under study (NODE_OPTIONS=--require …/memory-probe.cjs, MEMORY_PROBE_FILE=<json>):
// samples process.memoryUsage() every 20 ms and, at each new RSS peak (0.5 MB above the last), reads
// /proc/self/smaps and sums it by what the pages are (the node binary's code and read-only data, anonymous
// memory: V8's heap and glibc's thread arenas, [heap]: glibc's main arena, shared libraries). On exit it
// writes the samples, the breakdown at the peak and at the end, and, with MEMORY_PROBE_SNAPSHOT=<path>, a
// heap snapshot of what is live then. The probe itself costs about 1 MB.
const fs = require('node:fs')

const t0 = Date.now()
let peak = 0
let peakSample
let peakSmaps
const samples = []

function smaps() {
  const groups = {}
  const anon = []
  let current
  for (const line of fs.readFileSync('/proc/self/smaps', 'utf8').split('\n')) {
    const head = /^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \S+\s*(.*)$/.exec(line)
    if (head) {
      const sizeKb = (Number.parseInt(head[2], 16) - Number.parseInt(head[1], 16)) / 1024
      const name = head[4] || '[anon]'
      const perms = head[3]
      let key
      if (name === process.execPath || name.endsWith('/node')) key = `node binary ${perms.includes('x') ? 'code' : perms === 'r--p' ? 'read-only data' : perms}`
      else if (name === '[anon]') key = `anonymous ${perms}`
      else if (name.startsWith('/')) key = `file ${name.split('/').pop()}`
      else key = name
      current = {key, perms, rssKb: 0, sizeKb}
      if (name === '[anon]') anon.push(current)
      continue
    }
    const rss = /^Rss:\s+(\d+) kB/.exec(line)
    if (rss && current) {
      current.rssKb = Number(rss[1])
      groups[current.key] = (groups[current.key] ?? 0) + current.rssKb
    }
  }
  // A glibc thread arena: an anonymous rw part followed by the ---p rest of its 64 MB reservation.
  let arenas = 0
  let count = 0
  for (let i = 0; i < anon.length - 1; i++) {
    if (anon[i].perms.startsWith('rw') && anon[i + 1].perms === '---p' && Math.abs(anon[i].sizeKb + anon[i + 1].sizeKb - 65536) < 1) {
      arenas += anon[i].rssKb
      count++
    }
  }
  groups[`of which glibc thread arenas (${count})`] = arenas
  return groups
}

setInterval(() => {
  const m = process.memoryUsage()
  const sample = {arrayBuffers: m.arrayBuffers >> 10, external: m.external >> 10, heapTotal: m.heapTotal >> 10, heapUsed: m.heapUsed >> 10, rss: m.rss >> 10, t: Date.now() - t0}
  samples.push(sample)
  if (m.rss > peak + 512 * 1024) {
    peak = m.rss
    peakSample = sample
    peakSmaps = smaps()
  }
}, 20).unref()

process.on('exit', () => {
  const out = process.env.MEMORY_PROBE_FILE
  if (out) fs.writeFileSync(out, JSON.stringify({endSmaps: smaps(), maxRssKb: process.resourceUsage().maxRSS, peakSample, peakSmaps, samples}))
  if (process.env.MEMORY_PROBE_SNAPSHOT) require('node:v8').writeHeapSnapshot(process.env.MEMORY_PROBE_SNAPSHOT)
})
