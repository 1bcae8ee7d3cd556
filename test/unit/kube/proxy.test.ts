import {expect} from 'chai'

import {ConfigError} from '../../../src/lib/errors.js'
import {parseProxyUrl, proxyFor, proxyFromEnvironment} from '../../../src/lib/kube/proxy.js'

// The rules of Go's httpproxy (http.ProxyFromEnvironment, which client-go uses), case by case.
describe('proxyFromEnvironment', () => {
  const proxied = {HTTPS_PROXY: 'http://proxy.corp:3128', HTTP_PROXY: 'http://plain-proxy.corp:8080'}
  const cases: Array<{name: string; target: string; env: NodeJS.ProcessEnv; proxy?: string}> = [
    {env: proxied, name: 'https servers go through HTTPS_PROXY', proxy: 'http://proxy.corp:3128/', target: 'https://k8s.example:6443'},
    {env: proxied, name: 'http servers go through HTTP_PROXY', proxy: 'http://plain-proxy.corp:8080/', target: 'http://k8s.example:8080'},
    {env: {HTTP_PROXY: 'http://p:1'}, name: 'HTTP_PROXY is not used for https servers', target: 'https://k8s.example'},
    {env: {HTTPS_PROXY: 'http://upper:1', https_proxy: 'http://lower:1'}, name: 'upper case wins over lower case', proxy: 'http://upper:1/', target: 'https://k8s.example'},
    {env: {https_proxy: 'http://lower:1'}, name: 'lower case alone is read', proxy: 'http://lower:1/', target: 'https://k8s.example'},
    {env: {ALL_PROXY: 'http://all:1'}, name: 'ALL_PROXY is not read (Go ignores it)', target: 'https://k8s.example'},
    {env: {HTTPS_PROXY: 'proxy.corp:3128'}, name: 'a value without scheme means http://', proxy: 'http://proxy.corp:3128/', target: 'https://k8s.example'},
    {env: {HTTPS_PROXY: 'socks5://s:1080'}, name: 'socks5 values are kept', proxy: 'socks5://s:1080', target: 'https://k8s.example'},
    {env: proxied, name: 'loopback IPv4 is never proxied', target: 'https://127.0.0.1:6443'},
    {env: proxied, name: 'all of 127.0.0.0/8 is loopback', target: 'https://127.8.9.10:6443'},
    {env: proxied, name: 'loopback IPv6 is never proxied', target: 'https://[::1]:6443'},
    {env: proxied, name: 'localhost is never proxied', target: 'https://localhost:6443'},
    {env: {...proxied, NO_PROXY: '*'}, name: 'NO_PROXY=* disables the proxy', target: 'https://k8s.example'},
    {env: {...proxied, NO_PROXY: '10.0.0.0/8'}, name: 'NO_PROXY CIDRs match IPs inside', target: 'https://10.1.2.3:6443'},
    {env: {...proxied, NO_PROXY: '10.0.0.0/8'}, name: 'NO_PROXY CIDRs do not match IPs outside', proxy: 'http://proxy.corp:3128/', target: 'https://11.1.2.3:6443'},
    {env: {...proxied, NO_PROXY: 'fd00::/8'}, name: 'NO_PROXY IPv6 CIDRs', target: 'https://[fd12::1]:6443'},
    {env: {...proxied, NO_PROXY: '192.168.1.5'}, name: 'NO_PROXY single IPs', target: 'https://192.168.1.5'},
    {env: {...proxied, NO_PROXY: 'corp.example'}, name: 'a domain matches itself', target: 'https://corp.example'},
    {env: {...proxied, NO_PROXY: 'corp.example'}, name: 'a domain matches its subdomains', target: 'https://k8s.eu.corp.example'},
    {env: {...proxied, NO_PROXY: 'corp.example'}, name: 'a domain does not match a longer name', proxy: 'http://proxy.corp:3128/', target: 'https://notcorp.example'},
    {env: {...proxied, NO_PROXY: '.corp.example'}, name: 'a leading dot matches only subdomains', proxy: 'http://proxy.corp:3128/', target: 'https://corp.example'},
    {env: {...proxied, NO_PROXY: '*.corp.example'}, name: '*. matches subdomains', target: 'https://a.corp.example'},
    {env: {...proxied, NO_PROXY: 'corp.example:6443'}, name: 'a port must match', target: 'https://corp.example:6443'},
    {env: {...proxied, NO_PROXY: 'corp.example:443'}, name: 'a different port does not match', proxy: 'http://proxy.corp:3128/', target: 'https://corp.example:6443'},
    {env: {...proxied, NO_PROXY: 'corp.example:443'}, name: 'the scheme default port counts', target: 'https://corp.example'},
    {env: {...proxied, NO_PROXY: ' other.example , CORP.example '}, name: 'entries are trimmed and case-insensitive', target: 'https://k8s.corp.example'},
    {env: {...proxied, no_proxy: 'corp.example'}, name: 'lower-case no_proxy is read', target: 'https://k8s.corp.example'},
  ]
  for (const c of cases) {
    it(c.name, () => {
      expect(proxyFromEnvironment(new URL(c.target), c.env)?.href).to.equal(c.proxy)
    })
  }

  it('refuses HTTP_PROXY in a CGI environment, as Go does', () => {
    expect(() => proxyFromEnvironment(new URL('http://k8s.example'), {HTTP_PROXY: 'http://p:1', REQUEST_METHOD: 'GET'})).to.throw(ConfigError, /CGI/)
  })

  it('refuses a scheme Go cannot use, naming the variable', () => {
    expect(() => proxyFromEnvironment(new URL('https://k8s.example'), {https_proxy: 'ftp://p:21'})).to.throw(ConfigError, /https_proxy.*unsupported scheme "ftp"/)
  })
})

describe('proxyFor', () => {
  it('uses the cluster proxy-url over the environment, even for loopback (http.ProxyURL)', () => {
    const proxyUrl = new URL('http://127.0.0.1:3128')
    expect(proxyFor(new URL('https://127.0.0.1:6443'), {env: {HTTPS_PROXY: 'http://env:1', NO_PROXY: '*'}, proxyUrl})).to.equal(proxyUrl)
  })

  it('falls back to the environment without proxy-url', () => {
    expect(proxyFor(new URL('https://k8s.example'), {env: {HTTPS_PROXY: 'http://env:1'}})?.href).to.equal('http://env:1/')
  })
})

describe('parseProxyUrl', () => {
  for (const good of ['http://p:3128', 'https://p:3129', 'socks5://p:1080', 'http://user:pass@p:3128']) {
    it(`accepts ${good}`, () => expect(parseProxyUrl(good, 'here').href).to.equal(new URL(good).href))
  }
  it('refuses other schemes with the three kubectl accepts', () => {
    expect(() => parseProxyUrl('socks4://p:1080', 'cluster "c"')).to.throw(ConfigError, /cluster "c": proxy-url "socks4:\/\/p:1080" has unsupported scheme "socks4"; use http, https or socks5/)
  })
  it('refuses what is not a URL', () => {
    expect(() => parseProxyUrl('proxy:3128:x', 'c')).to.throw(ConfigError, /is not a URL|unsupported scheme/)
  })
})
