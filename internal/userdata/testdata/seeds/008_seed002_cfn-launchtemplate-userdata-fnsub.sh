#!/bin/bash
set -o xtrace
/etc/eks/bootstrap.sh ${ClusterName} ${BootstrapArguments}
/opt/aws/bin/cfn-signal --exit-code $? \
         --stack  ${AWS::StackName} \
         --resource NodeGroup  \
         --region ${AWS::Region}
