// Package trust decides which upstream definitions the proxy serves: pinning (a lock
// file of approved tool, prompt and resource template definitions, so that a definition
// changed after approval is reported or withheld) and screening (checks of every
// definition for text aimed at the model rather than at its user: invisible Unicode,
// instruction markup, directives, credential files, references to other servers' tools).
//
// Both run when a catalogue is fetched, through the router's Vetter hook, never per call:
// an item they withhold is not listed and not routable, and a call to it gets the answer
// for an unknown name. A verdict is cached by the bytes of the item, so a refetch of an
// unchanged catalogue costs a hash per item.
package trust
