/**
 * Kubernetes label selectors for a DeviceClass (devices.nfdctl.io) nodeSelector: whether one selects a
 * node, and the label syntax the validator checks selectors against. Pure.
 */
import type {LabelSelector} from './types.js'

type Expression = NonNullable<LabelSelector['matchExpressions']>[number]

/**
 * Whether the selector selects an object with these labels, as Kubernetes decides it: every matchLabels
 * pair and every expression must hold; NotIn and DoesNotExist hold when the key is absent. No selector, or
 * an empty one, selects everything (a class without nodeSelector applies to every node).
 */
export function matchesLabelSelector(selector: LabelSelector | undefined, labels: Readonly<Record<string, string>>): boolean {
  if (selector === undefined) return true
  for (const [key, value] of Object.entries(selector.matchLabels ?? {})) {
    if (labelOf(labels, key) !== value) return false
  }
  return (selector.matchExpressions ?? []).every((expression) => holds(expression, labelOf(labels, expression.key)))
}

function holds(expression: Expression, value: string | undefined): boolean {
  const values = expression.values ?? []
  switch (expression.operator) {
    case 'In':
      return value !== undefined && values.includes(value)
    case 'NotIn':
      return value === undefined || !values.includes(value)
    case 'Exists':
      return value !== undefined
    case 'DoesNotExist':
      return value === undefined
    default:
      return false // an operator the validator would have rejected selects nothing
  }
}

// Own keys only: a label named "constructor" or "__proto__" must not find Object.prototype.
function labelOf(labels: Readonly<Record<string, string>>, key: string): string | undefined {
  return Object.hasOwn(labels, key) ? labels[key] : undefined
}

const dnsLabel = '[a-z0-9]([-a-z0-9]*[a-z0-9])?'
/** DNS-1123 subdomain syntax (length checked separately). */
export const dnsSubdomainPattern = new RegExp(`^${dnsLabel}(\\.${dnsLabel})*$`)
const labelName = /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/

/** What is wrong with a label key (`[prefix/]name`), as a message fragment; undefined when it is valid. */
export function labelKeyProblem(key: string): string | undefined {
  const parts = key.split('/')
  if (parts.length > 2) return 'must be a label key, [prefix/]name, with at most one "/"'
  if (parts.length === 2 && (parts[0].length > 253 || !dnsSubdomainPattern.test(parts[0]))) {
    return `must be a label key: the prefix before "/" must be a DNS subdomain of at most 253 lower-case letters, digits, '-' and '.'`
  }
  const name = parts.at(-1) ?? ''
  if (name.length > 63 || !labelName.test(name)) {
    return `must be a label key: the name must be 1 to 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit`
  }
  return undefined
}
