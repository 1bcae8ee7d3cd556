// What `gc once --dry-run` of an empty cluster needs from Node, and no more: read a kubeconfig of inline
// credentials (as the control plane's is: JSON, one cluster and user), open one TLS connection and list
// Nodes, NodeFeatures and NodeResourceTopologies, print the counts. bench:startup times it beside the CLI
// as a floor: what no command-line tool can start below on the same Node binary.
const https = require('node:https')
const {readFileSync} = require('node:fs')

const config = JSON.parse(readFileSync(process.argv[2], 'utf8'))
const {cluster} = config.clusters[0]
const {user} = config.users[0]
const pem = (data) => Buffer.from(data, 'base64')
const agent = new https.Agent({ca: pem(cluster['certificate-authority-data']), cert: pem(user['client-certificate-data']), keepAlive: true, key: pem(user['client-key-data'])})
const list = (path) =>
  new Promise((resolve, reject) => {
    https
      .get(`${cluster.server}${path}?limit=500`, {agent}, (response) => {
        let body = ''
        response.setEncoding('utf8')
        response.on('data', (chunk) => (body += chunk))
        response.on('end', () => (response.statusCode === 200 ? resolve(JSON.parse(body).items.length) : reject(new Error(`${path}: HTTP ${response.statusCode}`))))
      })
      .on('error', reject)
  })
Promise.all(['/api/v1/nodes', '/apis/nfd.k8s-sigs.io/v1alpha1/nodefeatures', '/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies'].map(list)).then(
  (counts) => {
    process.stdout.write(`${counts.join(' ')}\n`)
    agent.destroy()
  },
  (error) => {
    process.stderr.write(`${error.message}\n`)
    process.exit(1)
  },
)
