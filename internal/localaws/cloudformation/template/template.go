// Package template reads CloudFormation templates (to be written).
package template
