import {BlockList, isIP, isIPv6} from 'node:net'
import {domainToASCII} from 'node:url'

import {ConfigError} from '../errors.js'

// Which proxy a request goes through, decided as client-go does: the cluster's proxy-url applies to every
// request (http.ProxyURL, loopback included); without it, HTTPS_PROXY / HTTP_PROXY / NO_PROXY as Go's
// http.ProxyFromEnvironment reads them (golang.org/x/net/http/httpproxy). proxy-from-env is not used for
// this: it knows no CIDRs, proxies loopback, honours ALL_PROXY and prefers the lower-case names, so it would
// pick a different proxy than kubectl for the same environment.

/** What a proxy URL may use: client-go's proxy-url validation allows these three (socks5 resolves remotely, as Go). */
const proxySchemes = ['http:', 'https:', 'socks5:'] as const

/** Where a kubeconfig proxy-url is checked: the message names the cluster. */
export function parseProxyUrl(text: string, where: string): URL {
  let url: URL
  try {
    url = new URL(text)
  } catch {
    throw new ConfigError(`${where}: proxy-url "${text}" is not a URL; use http://, https:// or socks5://host:port`)
  }
  if (!(proxySchemes as readonly string[]).includes(url.protocol)) {
    throw new ConfigError(`${where}: proxy-url "${text}" has unsupported scheme "${url.protocol.slice(0, -1)}"; use http, https or socks5 (as kubectl)`)
  }
  return url
}

/**
 * The proxy for a request to `target`, or undefined to connect directly. `proxyUrl` is the cluster's
 * (already parsed); `env` the environment the variables are read from.
 */
export function proxyFor(target: URL, options: {proxyUrl?: URL; env: NodeJS.ProcessEnv}): URL | undefined {
  if (options.proxyUrl) return options.proxyUrl
  return proxyFromEnvironment(target, options.env)
}

/** Go's httpproxy.FromEnvironment().ProxyFunc(), as a pure function of the environment. */
export function proxyFromEnvironment(target: URL, env: NodeJS.ProcessEnv): URL | undefined {
  const get = (name: string): string => env[name] || env[name.toLowerCase()] || '' // upper case first, as Go
  let name: string
  if (target.protocol === 'https:') {
    name = 'HTTPS_PROXY'
  } else if (target.protocol === 'http:') {
    name = 'HTTP_PROXY'
    if (get(name) && env.REQUEST_METHOD) {
      throw new ConfigError('HTTP_PROXY is set in a CGI environment (REQUEST_METHOD), where Go and kubectl refuse it; unset one of them')
    }
  } else {
    return undefined
  }
  const value = get(name)
  if (!value) return undefined
  const proxy = parseEnvProxy(value, env[name] ? name : name.toLowerCase())
  return useProxy(target, get('NO_PROXY')) ? proxy : undefined
}

function parseEnvProxy(value: string, variable: string): URL {
  let url: URL | undefined
  try {
    url = new URL(value)
  } catch {
    url = undefined
  }
  // Go: a value without a scheme ("proxy:3128") means http://.
  if (!url?.host) {
    try {
      url = new URL(`http://${value}`)
    } catch {
      throw new ConfigError(`${variable}="${value}" is not a proxy URL; use http://host:port, https://… or socks5://…`)
    }
  }
  if (url.protocol === 'socks5h:') return url
  if (!(proxySchemes as readonly string[]).includes(url.protocol)) {
    throw new ConfigError(`${variable}="${value}" has unsupported scheme "${url.protocol.slice(0, -1)}"; use http, https or socks5`)
  }
  return url
}

const defaultPorts: Record<string, string> = {'http:': '80', 'https:': '443'}

/** httpproxy's useProxy: false for loopback and for hosts NO_PROXY matches. */
function useProxy(target: URL, noProxy: string): boolean {
  const host = target.hostname.replace(/^\[|\]$/g, '').toLowerCase()
  const port = target.port || defaultPorts[target.protocol] || ''
  if (host === 'localhost') return false
  const family = isIP(host)
  if (family !== 0 && isLoopback(host)) return false
  for (const raw of noProxy.split(',')) {
    const entry = raw.trim().toLowerCase()
    if (entry === '') continue
    if (entry === '*') return false
    const cidr = /^(.+)\/(\d{1,3})$/.exec(entry)
    if (cidr && isIP(cidr[1]) !== 0) {
      if (family !== 0 && inCidr(host, cidr[1], Number(cidr[2]))) return false
      continue
    }
    const {entryHost, entryPort} = splitHostPort(entry)
    if (entryHost === '') continue
    if (isIP(entryHost) !== 0) {
      if (family !== 0 && sameIp(host, entryHost) && (entryPort === '' || entryPort === port)) return false
      continue
    }
    // "foo.com" matches foo.com and its subdomains, ".foo.com" and "*.foo.com" only subdomains.
    let suffix = entryHost.startsWith('*.') ? entryHost.slice(1) : entryHost
    const matchHost = !suffix.startsWith('.')
    if (matchHost) suffix = `.${suffix}`
    const ascii = domainToASCII(suffix.slice(1)) // IDNA, as Go
    if (ascii !== '') suffix = `.${ascii}`
    if ((host.endsWith(suffix) || (matchHost && host === suffix.slice(1))) && (entryPort === '' || entryPort === port)) return false
  }
  return true
}

function splitHostPort(entry: string): {entryHost: string; entryPort: string} {
  const bracketed = /^\[([^\]]*)\](?::(\d+))?$/.exec(entry)
  if (bracketed) return {entryHost: bracketed[1], entryPort: bracketed[2] ?? ''}
  if (isIPv6(entry)) return {entryHost: entry, entryPort: ''}
  const withPort = /^([^:]*):(\d+)$/.exec(entry)
  return withPort ? {entryHost: withPort[1], entryPort: withPort[2]} : {entryHost: entry, entryPort: ''}
}

function isLoopback(ip: string): boolean {
  if (isIPv6(ip)) {
    const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(ip)
    return mapped ? inCidr(mapped[1], '127.0.0.0', 8) : sameIp(ip, '::1')
  }
  return inCidr(ip, '127.0.0.0', 8)
}

function inCidr(ip: string, network: string, prefix: number): boolean {
  const family = isIPv6(network) ? 'ipv6' : 'ipv4'
  if ((isIPv6(ip) ? 'ipv6' : 'ipv4') !== family) return false
  const list = new BlockList()
  try {
    list.addSubnet(network, prefix, family)
  } catch {
    return false // an impossible prefix length: Go's ParseCIDR rejects it, and the entry matches nothing
  }
  return list.check(ip, family)
}

function sameIp(a: string, b: string): boolean {
  return isIPv6(a) === isIPv6(b) && inCidr(a, b, isIPv6(b) ? 128 : 32)
}
