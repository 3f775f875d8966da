// SPDX-License-Identifier: GPL-2.0

#include <linux/xarray.h>

__rust_helper void rust_helper_xa_lock_irqsave(struct xarray *xa, unsigned long *flags)
{
	xa_lock_irqsave(xa, *flags);
}

__rust_helper void rust_helper_xa_unlock_irqrestore(struct xarray *xa, unsigned long flags)
{
	xa_unlock_irqrestore(xa, flags);
}
