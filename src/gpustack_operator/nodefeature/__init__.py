"""Pure naming and arithmetic rules of the contract: node keys, labels, flavor/queue names, credits."""
